"""The interactive chat (`geode`) driven in a real terminal (tmux): an invalid approval answer asks again,
`n: <reason>` reaches the model, `⎿` lines summarise results, and re-attaching after the client was
SIGKILLed mid-turn shows the answer."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from geode.home import GeodeHome
from geode.providers.scripted import ScriptedServer
from tests.actors.tree_kit import ROOT, scripted_tree, wait_for
from tests.cli.scripted_chat import make_reply

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")


class Term:
    """One tmux server (own socket) with a window per chat process."""

    def __init__(self, home: GeodeHome, cwd: Path) -> None:
        self.sock = f"geode-test-{os.getpid()}"
        self.home, self.cwd = home, cwd

    def tmux(self, *args: str) -> str:
        out = subprocess.run(["tmux", "-L", self.sock, *args], capture_output=True, text=True, timeout=10)
        return out.stdout

    def start(self, name: str, *args: str) -> None:
        cmd = [
            "env",
            f"GEODE_HOME={self.home.root}",
            f"PYTHONPATH={ROOT}",
            sys.executable,
            "-m",
            "actors.cli.main",
            *args,
        ]
        self.tmux("new-session", "-d", "-s", name, "-x", "160", "-y", "50", "-c", str(self.cwd), *cmd)
        self.tmux("set-option", "-t", name, "remain-on-exit", "on")

    def screen(self, name: str) -> str:
        return self.tmux("capture-pane", "-p", "-J", "-t", name, "-S", "-500")

    def type(self, name: str, text: str) -> None:
        self.tmux("send-keys", "-t", name, "-l", text)
        self.tmux("send-keys", "-t", name, "Enter")

    def wait(self, name: str, text: str, timeout_s: float = 60.0, *, times: int = 1) -> str:
        def seen() -> str:
            s = self.screen(name)
            return s if s.count(text) >= times else ""

        return wait_for(
            seen,
            timeout_s,
            interval_s=0.1,
            what=f"{text!r} never appeared:\n{self.screen(name)}",
        )

    def pid(self, name: str) -> int:
        return int(self.tmux("display-message", "-p", "-t", name, "#{pane_pid}").strip())

    def kill_server(self) -> None:
        self.tmux("kill-server")


@pytest.fixture(scope="module")
def term(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Term, ScriptedServer, Path]]:
    base = tmp_path_factory.mktemp("term")
    ws = base / "ws"
    ws.mkdir()
    with scripted_tree(base, make_reply(ws), ws, cwd=ws) as (home, server):
        t = Term(home, ws)
        try:
            yield t, server, ws
        finally:
            t.kill_server()


def _tool_results_after(server: ScriptedServer, start: int) -> str:
    return json.dumps([r.body for r in server.requests[start:]])


def test_approval_reasks_on_nonsense_and_a_denial_reason_reaches_the_model(
    term: tuple[Term, ScriptedServer, Path],
) -> None:
    t, server, ws = term
    t.start("chat")
    t.wait("chat", "type a prompt")
    before = len(server.requests)
    t.type("chat", "write gamma")
    t.wait("chat", "◆ Approval · write_file")
    t.type("chat", "maybe")
    t.wait("chat", "'maybe' is not an answer")
    t.type("chat", "n: because gamma is reserved")
    screen = t.wait("chat", "done after")
    assert not (ws / "gamma.txt").exists()
    assert "because gamma is reserved" in _tool_results_after(server, before)  # in the model's next request
    deny_line = next(ln for ln in screen.splitlines() if "⎿ write_file" in ln)
    assert "✗" in deny_line and "because gamma is reserved" in deny_line

    t.type("chat", "write delta")
    t.wait("chat", "◆ Approval · write_file", times=2)
    t.type("chat", "y")
    t.wait("chat", "⎿ write_file · created 5 bytes")
    t.type("chat", "read delta")
    t.wait("chat", "⎿ read_file · read 1 line")
    assert (ws / "delta.txt").read_text() == "delta"
    t.type("chat", "exit")


def test_reattach_after_sigkill_mid_turn_shows_the_answer(term: tuple[Term, ScriptedServer, Path]) -> None:
    t, server, _ws = term
    t.start("gone")
    t.wait("gone", "type a prompt")
    before = len(server.requests)
    t.type("gone", "slow omega")
    wait_for(lambda: len(server.requests) > before, 60, what="the turn never reached the model")
    os.kill(t.pid("gone"), signal.SIGKILL)
    t.start("back", "--continue")
    screen = t.wait("back", "slow answer omega")
    assert "type a prompt" in screen
    t.type("back", "exit")
