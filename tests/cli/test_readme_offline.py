"""The README's offline block run as written in a real terminal (tmux) against a temporary home: the shipped
example model answers, proposes a write that asks for approval and lands, reads it back; `geode mcp-servers
add` / `remove` reach the daemon that block started; leaving the chat runs the block's last line."""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from geode.home import GeodeHome
from tests.actors.tree_kit import ROOT, geode, stop, wait_for
from tests.cli.test_chat_terminal import Term
from tests.mcp_server.mcp_kit import free_port

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")
MARKER = "<!-- readme-offline-chat"
README_PORT = "8765"
POLICY_SERVER = ROOT / "tests" / "tools" / "mcp_policy_server.py"


def offline_block() -> str:
    """The fenced block after the README's marker comment."""
    text = (ROOT / "README.md").read_text()
    m = re.search(re.escape(MARKER) + r"[^\n]*\n```[a-z]*\n(.*?)\n```", text, re.DOTALL)
    assert m is not None, "README.md lost its offline chat block (marker comment + fenced block)"
    return m.group(1)


@pytest.fixture(scope="module")
def offline(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Term, GeodeHome, Path]]:
    base = tmp_path_factory.mktemp("readme")
    ws, tmp = base / "ws", base / "tmp"
    ws.mkdir()
    tmp.mkdir()
    (ws / ".venv").symlink_to(ROOT / ".venv")  # the block runs `.venv/bin/geode` from the checkout
    block = offline_block()
    assert README_PORT in block
    script = base / "offline.sh"
    script.write_text(block.replace(README_PORT, str(free_port())) + "\n")  # a free port for the example's
    t = Term(GeodeHome(tmp), ws)
    t.sock = f"geode-readme-{os.getpid()}"
    home: GeodeHome | None = None
    try:
        t.tmux("new-session", "-d", "-s", "sh", "-x", "160", "-y", "50", "-c", str(ws),
               "env", f"TMPDIR={tmp}", "bash", str(script))  # fmt: skip
        t.tmux("set-option", "-t", "sh", "remain-on-exit", "on")
        t.wait("sh", "type a prompt")
        [root] = list(tmp.iterdir())  # the block's `mktemp -d` home
        home = GeodeHome(root)
        yield t, home, ws
        t.type("sh", "exit")
        t.wait("sh", "geode stopped")  # the block's last line: the daemon, then the scripted provider
    finally:
        if home is not None:
            stop(home)
        t.kill_server()


def test_the_readme_offline_block_chats_with_a_tool_round_and_an_approval(
    offline: tuple[Term, GeodeHome, Path],
) -> None:
    t, _home, ws = offline
    t.type("sh", "hello")
    t.wait("sh", "offline example model")
    t.type("sh", "what time is it")
    t.wait("sh", "You said: what time is it")
    t.type("sh", "write note.txt hi from the README")
    t.wait("sh", "◆ Approval · write_file")
    assert not (ws / "note.txt").exists()
    t.type("sh", "y")
    t.wait("sh", "write_file returned")
    assert (ws / "note.txt").read_text() == "hi from the README\n"
    t.type("sh", "read note.txt")
    screen = t.wait("sh", "read_file returned")
    assert re.search(r"1\s+hi from the README", screen.split("read_file returned")[-1]), screen


def _servers(home: GeodeHome) -> dict[str, dict[str, object]]:
    r = geode(home, "mcp-servers", "--json")
    assert r.returncode == 0, r.stderr
    return {row["name"]: row for row in json.loads(r.stdout)["servers"]}


def test_mcp_servers_add_and_remove_reach_the_running_daemon(offline: tuple[Term, GeodeHome, Path]) -> None:
    _t, home, ws = offline
    assert _servers(home) == {}
    home.config_file.write_text("# written by hand\n[loop]\nmax_rounds = 9  # mine\n")
    added = geode(
        home, "mcp-servers", "add", "pol", "--env", f"EFFECTS_FILE={ws / 'effects'}",
        "--", sys.executable, str(POLICY_SERVER),
    )  # fmt: skip
    assert added.returncode == 0, added.stderr
    assert "restarting the daemon's executor" in added.stdout
    assert home.config_file.read_text().startswith("# written by hand\n[loop]\nmax_rounds = 9  # mine\n")

    def running() -> dict[str, object] | None:
        row = _servers(home).get("pol")
        return row if row and row.get("state") == "running" else None

    row = wait_for(running, 60, interval_s=0.2, what="the added server never ran", swallow=(AssertionError,))
    assert "mcp__pol__lookup" in str(row["offered"])
    listed = geode(home, "mcp-servers", "list")
    assert re.search(r"^pol\s+stdio\s+running", listed.stdout, re.MULTILINE), listed.stdout

    removed = geode(home, "mcp-servers", "remove", "pol")  # the same executor restart takes it out
    assert removed.returncode == 0 and "restarting the daemon's executor" in removed.stdout, removed.stderr
    assert home.config_file.read_text() == "# written by hand\n[loop]\nmax_rounds = 9  # mine\n"
