"""`geode --repl` starts like `geode serve`: one config check (same lines, exit 78), the same sections."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from geode.home import GeodeHome
from geode.testing.scripted import ScriptedServer
from tests.actors.tree_kit import geode, scripted_home, scripted_tree

BAD = [
    '[loop]\nworkers = "two"\n',
    "[tools.bash]\nfsize_bytes = -1\n",
    "[lopp]\nworkers = 2\n",
]


def _lines(stderr: str, prog: str) -> list[str]:
    return [ln[len(prog) + 2 :] for ln in stderr.splitlines() if ln.startswith(f"{prog}: ")]


@pytest.mark.parametrize("text", BAD)
def test_repl_refuses_a_bad_config_with_serves_lines_and_exit_code(tmp_path: Path, text: str) -> None:
    home = GeodeHome(tmp_path / "gh")
    home.root.mkdir()
    home.config_file.write_text(text)
    served = geode(home, "serve", "--foreground", timeout=30)
    repl = geode(home, "--repl", timeout=30, input="exit\n")
    assert served.returncode == repl.returncode == 78, (served.stderr, repl.stderr)
    said = _lines(repl.stderr, "geode --repl")
    assert said and said == _lines(served.stderr, "geode serve"), (served.stderr, repl.stderr)
    assert said[0].startswith(f"{home.config_file}: ") and said[-1].endswith("no child was started")
    assert not (home.root / "incarnations.json").exists()  # no child of either mode was started


def _fill(req: Any) -> dict[str, Any]:
    """First call: write 64 KiB of zeros to the path the prompt names; after the tool result: done."""
    msgs = req.body.get("messages", []) if isinstance(req.body, dict) else []
    content = msgs[-1].get("content") if msgs else ""
    if isinstance(content, list) and any(b.get("type") == "tool_result" for b in content):
        return {"text": "filled"}
    text = content if isinstance(content, str) else " ".join(b.get("text", "") for b in content or [])
    cmd = f"head -c 65536 /dev/zero > {text.split()[-1]}"
    return {"tool_calls": [{"name": "run_bash", "input": {"command": cmd}}]}


def test_tools_bash_fsize_bytes_means_the_same_in_serve_and_repl(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    extra = "[tools.bash]\nfsize_bytes = 4096\n"
    with scripted_tree(tmp_path / "served", _fill, ws, extra=extra, cwd=ws) as (home, _):
        r = geode(
            home, "ask", f"fill {ws / 'served.bin'}", "--json", "--dangerously-skip-permissions", cwd=ws
        )
        assert r.returncode == 0, r.stderr
    server = ScriptedServer(_fill).start()
    try:
        home = scripted_home(tmp_path / "repl", server, ws, extra)
        r = geode(
            home,
            "--repl",
            "--dangerously-skip-permissions",
            cwd=ws,
            timeout=90,
            input=f"fill {ws / 'repl.bin'}\nexit\n",
        )
        assert r.returncode == 0, r.stdout + r.stderr
        assert "hosts actors.executor:build" in (home.logs_dir / "repl.log").read_text()  # [log], as serve
    finally:
        server.stop()
    # RLIMIT_FSIZE from [tools.bash] cut both files at the configured size, not the 50 MiB default
    assert (ws / "served.bin").stat().st_size == (ws / "repl.bin").stat().st_size == 4096
