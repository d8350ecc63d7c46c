"""The interactive chat (`geode`) and `geode ask` driven in a real terminal (tmux): an invalid approval answer
asks again, `n: <reason>` reaches the model, `⎿` lines summarise results, re-attaching after the client was
SIGKILLed mid-turn shows the answer; an approval shows the whole command unredacted and Enter denies it,
"always" covers that exact command only, and a model's terminal sequences are shown escaped; Ctrl-C at the
approval prompt cancels the turn, and the spinner is back while an approved command runs."""

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
from geode.testing.scripted import ScriptedServer
from tests.actors.tree_kit import ROOT, geode, scripted_tree, wait_for
from tests.cli.scripted_chat import commands, make_reply

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

    def screen(self, name: str, *, styled: bool = False) -> str:
        """The pane's text (``styled``: with the escape sequences of its cells' colours and attributes)."""
        return self.tmux("capture-pane", "-p", "-J", *(["-e"] if styled else []), "-t", name, "-S", "-500")

    def enter(self, name: str) -> None:
        self.tmux("send-keys", "-t", name, "Enter")

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


def _requests_with(server: ScriptedServer, text: str) -> int:
    """How many of the model's requests carry ``text`` (one session's prompt) anywhere in their body."""
    return sum(text in json.dumps(r.body) for r in server.requests)


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


def _shown_request(screen: str) -> str:
    """The request the last approval prompt on ``screen`` shows (its ``│`` lines, joined)."""
    lines = screen.splitlines()
    start = max(i for i, ln in enumerate(lines) if "◆ Approval" in ln)
    shown = []
    for ln in lines[start + 1 :]:
        if ln.startswith("  │"):
            shown.append(ln[4:])
        elif shown:
            break
    return "".join(shown)


def _whole(command: str) -> str:
    """The run_bash request as the executor asks it, blanks dropped (the terminal trims a line's end)."""
    return "".join(f"run_bash {json.dumps({'command': command}, ensure_ascii=False)}".split())


def _session(screen: str) -> str:
    return screen.split("· session ", 1)[1].split()[0]


def test_the_whole_command_is_shown_unredacted_and_enter_denies(
    term: tuple[Term, ScriptedServer, Path],
) -> None:
    """A 3,000-character command with its `; touch` tail and an `export token=$(…)` shown whole (was: the
    first 80 characters, the token redacted); an empty answer denies (was: approved); the unredacted text
    is in no log and not on the timeline."""
    t, _server, ws = term
    cmds = commands(ws)
    t.start("whole")
    head = t.wait("whole", "type a prompt")
    t.type("whole", "bash long")
    screen = t.wait("whole", "(Enter denies")
    assert "".join(_shown_request(screen).split()) == _whole(cmds["long"])
    t.enter("whole")
    t.wait("whole", "⎿ run_bash ✗")
    t.type("whole", "bash hidden")
    screen = t.wait("whole", "(Enter denies", times=2)
    assert "".join(_shown_request(screen).split()) == _whole(cmds["hidden"])
    assert "$(echo${IFS}X>" in screen and "[REDACTED]" not in screen
    t.enter("whole")
    t.wait("whole", "⎿ run_bash ✗", times=2)
    assert not (ws / "flag_long").exists() and not (ws / "flag_hidden").exists()
    t.type("whole", "exit")
    secret = "echo${IFS}X>"
    timeline = geode(t.home, "timeline", _session(head), "--json")
    assert timeline.returncode == 0, timeline.stderr
    assert "run_bash" in timeline.stdout and secret not in timeline.stdout
    logs = [f for f in t.home.logs_dir.rglob("*") if f.is_file()]
    assert logs and not [f for f in logs if secret.encode() in f.read_bytes()]


def test_always_covers_only_that_exact_command(term: tuple[Term, ScriptedServer, Path]) -> None:
    """"a" on `ls -la` (the prompt says: this exact command) approves `ls -la` again, never `ls /etc` nor
    `bash -c …` (was: every later run_bash of the session)."""
    t, _server, ws = term
    t.start("always")
    t.wait("always", "type a prompt")
    t.type("always", "bash ls")
    screen = t.wait("always", "◆ Approval · run_bash")
    assert "a always covers: this exact command" in screen
    t.type("always", "a")
    t.wait("always", "⎿ run_bash · exit 0")
    t.type("always", "bash lsetc")
    t.wait("always", "◆ Approval · run_bash", times=2)
    t.type("always", "n")
    t.wait("always", "⎿ run_bash ✗")
    t.type("always", "bash bashc")
    t.wait("always", "◆ Approval · run_bash", times=3)
    t.type("always", "n")
    t.wait("always", "⎿ run_bash ✗", times=2)
    assert not (ws / "flag_bashc").exists()
    t.type("always", "bash ls")
    screen = t.wait("always", "⎿ run_bash · exit 0", times=2)
    assert screen.count("◆ Approval · run_bash") == 3  # the exact command again: remembered
    t.type("always", "exit")


def _assert_trap_escaped(t: Term, name: str) -> None:
    screen = t.wait(name, "◆ Approval · write_file")
    assert "see^[[8m hidden ^[]52;c;ZXZpbA==\\x07^[]0;pwned\\x07^[[2J\\x9b31m end" in screen
    styled = t.screen(name, styled=True)
    assert "\x1b[8m" not in styled and "\x1b[2J" not in styled  # nothing concealed below the reply
    assert t.tmux("display-message", "-p", "-t", name, "#{pane_title}").strip() != "pwned"
    assert "evil" not in t.tmux("list-buffers")  # OSC 52 did not reach the clipboard


def test_model_terminal_sequences_are_shown_escaped_in_chat_and_ask(
    term: tuple[Term, ScriptedServer, Path],
) -> None:
    """A reply with conceal, OSC 52, title and clear-screen sequences is printed escaped and the approval
    prompt after it is visible, in the chat and in `geode ask`; `geode ask` shows the whole command too and
    Enter denies it there."""
    t, _server, ws = term
    t.tmux("start-server")
    t.tmux("set-option", "-s", "set-clipboard", "on")  # an OSC 52 write would make a paste buffer
    t.start("trap")
    t.wait("trap", "type a prompt")
    t.type("trap", "trap")
    _assert_trap_escaped(t, "trap")
    t.type("trap", "n")
    t.wait("trap", "⎿ write_file ✗")
    t.type("trap", "exit")
    t.start("asktrap", "ask", "trap")
    _assert_trap_escaped(t, "asktrap")
    t.enter("asktrap")
    t.wait("asktrap", "⎿ write_file ✗")
    t.start("asklong", "ask", "bash long")
    screen = t.wait("asklong", "(Enter denies")
    assert "".join(_shown_request(screen).split()) == _whole(commands(ws)["long"])
    t.enter("asklong")
    t.wait("asklong", "⎿ run_bash ✗")
    assert not (ws / "trap.txt").exists() and not (ws / "flag_long").exists()


def _turn_ended(t: Term, session: str) -> str | None:
    """The reason on the session's last ``turn.ended`` timeline row, once there is one."""
    out = geode(t.home, "timeline", session, "--json")
    if out.returncode != 0:
        return None
    ended = [r["event"] for r in json.loads(out.stdout) if r["event"]["kind"] == "turn.ended"]
    return str(ended[-1]["payload"].get("reason")) if ended else None


def test_ctrl_c_at_the_approval_prompt_cancels_the_turn(term: tuple[Term, ScriptedServer, Path]) -> None:
    """Ctrl-C at the approval prompt ends the turn `user_cancelled` (the header promises it): the command
    does not run and the model is not asked again (was: a denial, and the model ran another round)."""
    t, server, ws = term
    t.start("cancel")
    head = t.wait("cancel", "type a prompt")
    t.type("cancel", "bash cancel")
    t.wait("cancel", "(Enter denies")
    # this session's requests only: the module's server also answers other tests' chats, whose late requests
    # (a turn still ending after its test) once made a count of every request 27 instead of 26
    asked = _requests_with(server, "bash cancel")
    t.tmux("send-keys", "-t", "cancel", "C-c")

    def over() -> str:
        screen = t.screen("cancel")
        return screen if "turn ended:" in screen or "done after" in screen else ""

    screen = wait_for(over, 60, interval_s=0.1, what="the turn never ended after Ctrl-C")
    assert "turn ended: user_cancelled" in screen and "done after" not in screen, screen
    reason = wait_for(lambda: _turn_ended(t, _session(head)), 30, what="the turn.ended row")
    assert reason == "user_cancelled"
    assert _requests_with(server, "bash cancel") == asked and not (ws / "flag_cancel").exists()
    t.type("cancel", "still here")  # back at the prompt
    t.wait("cancel", "echo: still here")
    t.type("cancel", "exit")


def test_the_spinner_is_back_while_an_approved_command_runs(term: tuple[Term, ScriptedServer, Path]) -> None:
    """After "y" the spinner line shows again while `sleep 3` runs (was: hidden until the turn's end)."""
    t, _server, _ws = term
    t.start("spin")
    t.wait("spin", "type a prompt")
    t.type("spin", "bash sleep")
    t.wait("spin", "(Enter denies")
    t.type("spin", "y")

    def spinning() -> str:
        screen = t.screen("spin")
        after = screen[screen.rindex("(Enter denies") :]
        return screen if "working ·" in after and "⎿ run_bash" not in after else ""

    wait_for(spinning, 20, interval_s=0.05, what=f"no spinner while the command ran:\n{t.screen('spin')}")
    t.wait("spin", "⎿ run_bash · exit 0")
    t.type("spin", "exit")
