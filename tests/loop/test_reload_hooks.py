"""On a real tree the loop workers run the `[[hooks.UserPromptSubmit]]` tables of config.toml, and
`geode reload` makes a config edit (here: removing a blocking hook) take effect for new turns."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.actors.tree_kit import geode, scripted_tree

BLOCK = """
[[hooks.UserPromptSubmit]]
command = "echo 'prompts are paused by policy' >&2; exit 2"
"""


def test_a_prompt_hook_blocks_until_reload_removes_it(tmp_path: Path) -> None:
    def reply(_req: Any) -> Any:
        return {"text": "answered"}

    with scripted_tree(tmp_path, reply, extra=BLOCK) as (home, server):
        blocked = geode(home, "ask", "hello", timeout=60)
        assert blocked.returncode == 1, (blocked.stdout, blocked.stderr)
        assert "input_blocked" in blocked.stderr and server.requests == []
        without = home.config_file.read_text().replace(BLOCK, "")
        assert "UserPromptSubmit" not in without
        home.config_file.write_text(without)
        assert geode(home, "reload", timeout=30).returncode == 0
        ok = geode(home, "ask", "hello", timeout=60)
        assert ok.returncode == 0, ok.stderr
        assert "answered" in ok.stdout


def test_every_turn_after_the_reload_runs_on_the_new_config_on_any_worker(tmp_path: Path) -> None:
    """`geode reload` returns once every loop worker confirmed it applied the new copy, so a turn asked right
    after it, on either worker, runs the new hooks (a clean-clone CI run once saw the old ones)."""

    def reply(_req: Any) -> Any:
        return {"text": "answered"}

    with scripted_tree(tmp_path, reply, extra=BLOCK) as (home, _server):
        base = home.config_file.read_text().replace(BLOCK, "")
        for n, blocking in enumerate((False, True, False, True)):
            home.config_file.write_text(base + (BLOCK if blocking else ""))
            reload = geode(home, "reload", timeout=60)
            assert reload.returncode == 0, (reload.stdout, reload.stderr)
            got = geode(home, "ask", f"hello {n}", timeout=60)
            if blocking:
                assert got.returncode == 1 and "input_blocked" in got.stderr, (n, got.stdout, got.stderr)
            else:
                assert got.returncode == 0 and "answered" in got.stdout, (n, got.stdout, got.stderr)
