"""Ctrl-C anywhere in `geode ask`'s follow loop cancels the turn and still ends with the turn's outcome (the
`--json` answer object), never with a bare "cancelled" exit: SIGINT is latched while a turn is followed and
taken at the loop's top; a person's approval prompt still gets Ctrl-C at once
(actors/cli/interrupt_latch.py)."""

from __future__ import annotations

import os
import signal
import threading
from pathlib import Path
from typing import Any

import pytest

from actors.cli.client import ControlClient
from actors.cli.interrupt_latch import LATCH, InterruptLatch
from geode.home import GeodeHome
from geode.protocol import control as c
from geode.protocol.envelope import Envelope
from tests.cli.fake_control import FakeControl, welcome

OUTCOME = {"termination_reason": "user_cancelled", "text": "run_bash: cancelled, not applied"}


def _turn_done(turn_id: str, seq: int) -> Envelope:
    body = {"session_id": "s-1", "turn_id": turn_id, "seq": seq, "kind": "turn_done"}
    return Envelope(kind="cast", type=c.CLI_EVENT, body={**body, "data": {"result": OUTCOME}})


def test_ctrl_c_during_a_catch_up_request_cancels_the_turn_and_reports_its_end(tmp_path: Path) -> None:
    """The stream is quiet, so the client asks for a catch-up; Ctrl-C lands while it waits for that reply (a
    line no handler guarded: before, KeyboardInterrupt left the follow loop and `geode ask --json` printed no
    answer object). Now the catch-up finishes, the turn is cancelled by its id and followed to its end."""
    cancelled: list[str] = []
    servers: list[FakeControl] = []

    def answer(env: Envelope, ident: bytes) -> dict[str, Any] | None:
        if env.type == c.HANDSHAKE:
            return welcome()
        if env.type == c.PROMPT:
            return {"turn_id": env.body["turn_id"], "session_id": "s-1", "position": 0}
        if env.type == c.ATTACH and not cancelled:  # the quiet stream's catch-up: Ctrl-C now, reply after
            os.kill(os.getpid(), signal.SIGINT)
            return {"events": [], "session_id": "s-1"}
        if env.type == c.CLI_CANCEL:
            cancelled.append(env.body["turn_id"])
            servers[0].send(
                ident, env.reply_ok({"turn_id": env.body["turn_id"], "state": "cancellation_requested"})
            )
            servers[0].send(ident, _turn_done(env.body["turn_id"], 3))
            return None
        return {"ok": True}

    home = GeodeHome(tmp_path / "gh").ensure()
    with FakeControl(home, answer=answer) as fc:
        servers.append(fc)
        cl = ControlClient(home, client_version="test")
        try:
            cl.connect(timeout_s=5.0, is_tty=False, mode="IPC")
            got = cl.run_prompt("run the slow command", timeout_s=30, on_interrupt=lambda: True)
        finally:
            cl.close()
    assert cancelled == [got["turn_id"]]  # the cancel named our turn, once
    assert got["termination_reason"] == "user_cancelled" and got["text"] == OUTCOME["text"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # put back when the turn ended


def test_a_latched_ctrl_c_raises_at_a_persons_prompt_and_nowhere_else() -> None:
    latch = InterruptLatch()
    with latch.installed():
        os.kill(os.getpid(), signal.SIGINT)  # handled between bytecodes: latched, nothing raised
        for _ in range(1000):
            if latch.pending:
                break
        assert latch.take() and not latch.take()
        with pytest.raises(KeyboardInterrupt), latch.raising():  # at the approval prompt: at once
            os.kill(os.getpid(), signal.SIGINT)
            threading.Event().wait(5)  # (a blocking read of the person's answer)
        os.kill(os.getpid(), signal.SIGINT)
        for _ in range(1000):
            if latch.pending:
                break
        with pytest.raises(KeyboardInterrupt), latch.raising():  # latched just before the prompt: on entry
            pass
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_the_latch_leaves_other_threads_and_other_handlers_alone() -> None:
    seen: list[Any] = []
    t = threading.Thread(target=lambda: seen.append(_installed_handler()))
    t.start()
    t.join(5)
    assert seen == [signal.default_int_handler]  # an MCP host's worker thread: nothing installed
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        assert _installed_handler() is signal.SIG_IGN  # an ignored Ctrl-C stays ignored
    finally:
        signal.signal(signal.SIGINT, previous)
    assert not LATCH.pending


def _installed_handler() -> Any:
    with LATCH.installed():
        return signal.getsignal(signal.SIGINT)
