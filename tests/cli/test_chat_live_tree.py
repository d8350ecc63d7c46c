"""The interactive chat feels alive, driven as a process on a pseudo-terminal against a scripted tree: a
spinner (elapsed time) while the model works, the answer streamed as it arrives, Ctrl-C back at the prompt
long before a slow model answers (the turn ends user_cancelled), and one line when this shell's provider env
differs from the daemon's. Off a terminal there is no spinner."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from geode.home import GeodeHome
from geode.testing.scripted import ScriptedServer
from tests.actors.tree_kit import ROOT, geode, scripted_tree, wait_for

STREAM = tuple(f"w{i} " for i in range(1, 9))  # 8 chunks…
CHUNK_S = 0.4  # …this far apart: the whole answer takes ~3 s
SLOW_S = 30.0  # a model that answers long after any Ctrl-C test gives up
MISMATCH = "differs from the running daemon's"
PROVIDER_ENV = ("GEODE_MODEL", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "OPENAI_API_KEY", "OPENAI_BASE_URL")
CPR = b"\x1b[6n"  # the prompt line asks where the cursor is: answered "on the last row", as a terminal would
CSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x08")  # the prompt line's cursor moves, attributes and backspaces
# the child takes the pty as its controlling terminal, so \x03 becomes SIGINT for it
TTY_MAIN = (
    "import fcntl, runpy, termios; fcntl.ioctl(0, termios.TIOCSCTTY, 0); "
    "runpy.run_module('actors.cli.main', run_name='__main__')"
)


def reply(req: Any) -> Any:
    msgs = req.body.get("messages", []) if isinstance(req.body, dict) else []
    content = msgs[-1].get("content") if msgs else ""
    text = content if isinstance(content, str) else " ".join(str(b.get("text", "")) for b in content or [])
    if "stream" in text:
        return {"chunks": STREAM, "chunk_delay_s": CHUNK_S}
    if "stuck" in text:
        return {"text": "too late", "delay_s": SLOW_S}
    if "nap" in text:
        return {"text": "napped", "delay_s": 1.0}
    return {"text": "echo: " + " ".join(text.split()[-2:])}


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[GeodeHome, ScriptedServer]]:
    with scripted_tree(tmp_path_factory.mktemp("live"), reply) as (home, server):
        wait_for(lambda: (home.run_dir / "providers.json").exists(), 30, what="the daemon's provider view")
        yield home, server


class PtyChat:
    """``geode`` (the chat) on a pseudo-terminal; everything it writes is collected in ``out``."""

    def __init__(self, home: GeodeHome, **env: str) -> None:
        base = {k: v for k, v in os.environ.items() if k not in PROVIDER_ENV}
        master, slave = os.openpty()
        self.proc = subprocess.Popen(
            [sys.executable, "-c", TTY_MAIN],
            stdin=slave,
            stdout=slave,
            stderr=slave,
            cwd=ROOT,
            env={**base, "GEODE_HOME": str(home.root), "PYTHONPATH": str(ROOT), "TERM": "xterm", **env},
            start_new_session=True,
        )
        os.close(slave)
        self.master = master
        self._buf = bytearray()
        self._lock = threading.Lock()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        while True:
            try:
                data = os.read(self.master, 4096)
            except OSError:
                return
            if not data:
                return
            if CPR in data:
                os.write(self.master, b"\x1b[24;1R")
            with self._lock:
                self._buf += data

    @property
    def out(self) -> str:
        """What was written, without the prompt line's control sequences (prompt_toolkit redraws it)."""
        with self._lock:
            return CSI.sub("", self._buf.decode(errors="replace"))

    def send(self, s: str) -> None:
        os.write(self.master, s.encode())

    def wait(self, pred: Any, timeout_s: float = 30.0, what: str = "") -> str:
        try:
            return wait_for(lambda: self.out if pred(self.out) else "", timeout_s, what=what)
        except AssertionError as exc:
            raise AssertionError(f"{exc}\nthe terminal so far:\n{self.out[-2000:]}") from None

    def close(self) -> None:
        if self.proc.poll() is None:
            self.send("exit\n")
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        os.close(self.master)


@pytest.fixture
def chat(tree: tuple[GeodeHome, ScriptedServer]) -> Iterator[PtyChat]:
    c = PtyChat(tree[0])
    try:
        c.wait(lambda o: "type a prompt" in o and o.rstrip().endswith(">"), what="the chat's prompt")
        yield c
    finally:
        c.close()


def test_spinner_then_the_answer_streams_in_before_the_turn_ends(chat: PtyChat) -> None:
    assert MISMATCH not in chat.out  # this shell sets no provider variable
    start = len(chat.out)
    chat.send("please stream\n")
    chat.wait(lambda o: re.search(r"working · \d+\.\d s", o[start:]), what="the spinner")
    seen = chat.wait(lambda o: "w2 " in o[start:], what="the first streamed words")
    part = seen[start:]
    assert re.search(r"working · \d+\.\d s", part[: part.index("w1 ")]), part  # spinner before the answer
    assert "w8" not in part, part  # streamed: the first words are shown, the model is still answering
    assert not part.rstrip().endswith(">"), part
    done = chat.wait(lambda o: "w8" in o[start:] and o.rstrip().endswith(">"), what="the whole answer")
    assert "w1 w2 w3 w4 w5 w6 w7 w8" in done[start:]


def test_ctrl_c_returns_to_the_prompt_at_once_and_cancels_the_turn(
    chat: PtyChat, tree: tuple[GeodeHome, ScriptedServer]
) -> None:
    server = tree[1]
    start, asked = len(chat.out), len(server.requests)
    chat.send("stuck please\n")
    wait_for(lambda: len(server.requests) > asked, 30, what="the model request")
    chat.wait(lambda o: "working ·" in o[start:], what="the spinner")
    chat.send("\x03")
    # back at the prompt within a few seconds, long before the model's 30 s answer
    out = chat.wait(
        lambda o: "user_cancelled" in o[start:] and o.rstrip().endswith(">"), 8.0, what="back at the prompt"
    )
    assert "too late" not in out[start:]
    start = len(chat.out)
    chat.send("hello there\n")  # the session is free: the cancelled turn ended in the daemon
    out = chat.wait(lambda o: "echo: hello there" in o[start:], 15.0, what="the next answer")
    assert "queued behind" not in out[start:]


def test_a_different_provider_env_in_this_shell_is_said_once(tree: tuple[GeodeHome, ScriptedServer]) -> None:
    c = PtyChat(tree[0], ANTHROPIC_API_KEY="sk-shell-only-key")
    try:
        out = c.wait(lambda o: o.rstrip().endswith(">"), what="the chat's prompt")
        assert out.count(MISMATCH) == 1, out
        line = next(ln for ln in out.splitlines() if MISMATCH in ln)
        assert "ANTHROPIC_API_KEY" in line and "API key" in line, line
        assert "sk-shell-only-key" not in out and "sk-test-key" not in out  # names, never values
        c.send("hi again\n")
        out = c.wait(lambda o: "echo: hi again" in o, what="the answer")
        assert out.count(MISMATCH) == 1
    finally:
        c.close()


def test_no_spinner_off_a_terminal(tree: tuple[GeodeHome, ScriptedServer]) -> None:
    env_home = tree[0]
    r = geode(env_home, input="nap now\nexit\n", timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "napped" in r.stdout
    assert "working" not in r.stdout + r.stderr and "\x1b[2K" not in r.stdout
