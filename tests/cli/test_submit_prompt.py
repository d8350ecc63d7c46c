"""reattach.submit_prompt against a fake control socket: an unanswered cli.prompt is re-sent with the same
turn id after ~1 s (it was 5 s), a late reply to any earlier send answers, a control that does not know the
connection gets a handshake first, re-sends are bounded, and giving up says which turn may run
(TurnContinues, not 'daemon unavailable')."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

from actors.cli.client import ControlClient
from actors.cli.reattach import TurnContinues, new_turn_id, submit_prompt
from geode.home import GeodeHome
from geode.protocol import control as c
from geode.protocol.envelope import Envelope
from geode.protocol.errors import BadRequest, GeodeError, Unavailable
from tests.cli.fake_control import FakeControl, welcome
from tests.waiting import poll_for


class Script:
    """Answers prompts as ``on_prompt(n, env)`` says (n counts the prompts); records the prompts' turn ids."""

    def __init__(self, on_prompt: Any) -> None:
        self.on_prompt = on_prompt
        self.turn_ids: list[str] = []
        self.kinds: list[str] = []
        self.fc: FakeControl | None = None
        self.held: list[Envelope] = []

    def __call__(self, env: Envelope, ident: bytes) -> dict[str, Any] | None:
        self.kinds.append(env.type)
        if env.type == c.HANDSHAKE:
            return welcome()
        if env.type != c.PROMPT:
            return {"ok": True}
        self.turn_ids.append(env.body["turn_id"])
        return self.on_prompt(len(self.turn_ids), env, ident, self)  # type: ignore[no-any-return]


def _accepted(env: Envelope) -> dict[str, Any]:
    return {"turn_id": env.body["turn_id"], "session_id": "s-1", "position": 0}


def _submit(tmp_path: Path, script: Script, give_up_s: float = 10.0) -> tuple[dict[str, Any], float, str]:
    home = GeodeHome(tmp_path / "gh").ensure()
    tid = new_turn_id()
    with FakeControl(home, answer=script) as fc:
        script.fc = fc
        cl = ControlClient(home, client_version="test")
        try:
            cl.connect(timeout_s=5.0, is_tty=False, mode="IPC")
            t0 = time.monotonic()
            body = {"text": "hi", "session_id": "s-1", "turn_id": tid}
            got = submit_prompt(cl, body, [], give_up_s=give_up_s)
            return got, time.monotonic() - t0, tid
        finally:
            cl.close()


def test_an_unanswered_prompt_is_resent_with_the_same_turn_id_after_about_a_second(tmp_path: Path) -> None:
    script = Script(lambda n, env, ident, s: None if n == 1 else _accepted(env))  # the first reply is lost
    got, took, tid = _submit(tmp_path, script)
    assert got["turn_id"] == tid and script.turn_ids == [tid, tid]
    assert 0.9 <= took < 2.0, f"accepted after {took:.2f}s"  # was 5 s (PROMPT_REPLY_S) plus a handshake


def test_a_late_reply_to_an_earlier_send_answers(tmp_path: Path) -> None:
    """The first send's reply comes only once the second send arrived (a slow control): it is taken, the
    client does not wait for the second one's reply (never sent)."""

    def on_prompt(n: int, env: Envelope, ident: bytes, s: Script) -> dict[str, Any] | None:
        if n == 1:
            s.held.append(env)
        elif n == 2:
            assert s.fc is not None
            first = s.held[0]
            s.fc.send(ident, first.reply_ok(_accepted(first)))
        return None

    got, took, tid = _submit(tmp_path, Script(on_prompt))
    assert got["turn_id"] == tid and took < 2.0, (got, took)


def test_a_control_that_does_not_know_the_connection_gets_a_handshake_then_the_prompt(tmp_path: Path) -> None:
    def on_prompt(n: int, env: Envelope, ident: bytes, s: Script) -> dict[str, Any] | None:
        if n == 1:
            assert s.fc is not None
            s.fc.send(ident, env.reply_error("not_ready", "send cli.handshake first"))
            return None
        return _accepted(env)

    script = Script(on_prompt)
    got, took, tid = _submit(tmp_path, script)
    assert got["turn_id"] == tid and took < 1.0, took
    assert script.kinds[:4] == [c.HANDSHAKE, c.PROMPT, c.HANDSHAKE, c.PROMPT], script.kinds


def test_resends_are_bounded_and_giving_up_names_the_turn(tmp_path: Path) -> None:
    script = Script(lambda n, env, ident, s: None)  # never answered
    with pytest.raises(TurnContinues) as info:
        _submit(tmp_path, script, give_up_s=4.0)
    assert info.value.accepted is False and info.value.turn_id in info.value.explain()
    assert "geode --resume s-1" in info.value.explain()
    assert len(set(script.turn_ids)) == 1
    assert 3 <= len(script.turn_ids) <= 4, script.turn_ids  # at 0, 1, 3 s (each wait doubles), not 40


def test_a_refused_prompt_is_not_resent(tmp_path: Path) -> None:
    def on_prompt(n: int, env: Envelope, ident: bytes, s: Script) -> dict[str, Any] | None:
        assert s.fc is not None
        s.fc.send(ident, env.reply_error("bad_request", "too long"))
        return None

    script = Script(on_prompt)
    with pytest.raises(BadRequest):
        _submit(tmp_path, script)
    assert len(script.turn_ids) == 1


def test_a_request_in_flight_when_control_goes_away_fails_at_once(tmp_path: Path) -> None:
    """cli.attach sent, then the control socket closes (its child was killed): the client says so at once
    instead of waiting out the request's timeout (a re-attach then started 2 s late in the chaos runs)."""
    home = GeodeHome(tmp_path / "gh").ensure()
    got: list[BaseException] = []
    with FakeControl(home, answer=lambda env, ident: welcome() if env.type == c.HANDSHAKE else None) as fc:
        cl = ControlClient(home, client_version="test")
        cl.connect(timeout_s=5.0, is_tty=False, mode="IPC")
        asked = threading.Thread(target=lambda: _capture(got, cl, fc))
        asked.start()
        poll_for(lambda: c.ATTACH in fc.seen, 5, what="the attach to arrive")
        t0 = time.monotonic()
    asked.join(10)  # the fake control closed its socket on leaving the block
    took, drops = time.monotonic() - t0, cl.disconnects
    cl.close()
    assert got and isinstance(got[0], Unavailable), got
    assert took < 1.0 and drops >= 1, (took, drops)  # before: RequestTimeout after the full 5 s


def _capture(got: list[BaseException], cl: ControlClient, fc: FakeControl) -> None:
    try:
        cl.request(c.ATTACH, {"session_id": "s-1", "after_seq": 0}, timeout_s=5.0)
    except GeodeError as exc:
        got.append(exc)


def test_ctrl_c_before_the_prompt_is_acknowledged_cancels_that_turn_and_reports_its_end(
    tmp_path: Path,
) -> None:
    """Ctrl-C while the prompt's reply has not come (a loaded machine: the turn already runs its tool) used to
    exit with nothing on stdout. Now the turn is cancelled by its id and followed to its real end."""
    import os
    import signal

    cancelled: list[dict[str, Any]] = []
    outcome = {"termination_reason": "user_cancelled", "text": "run_bash: cancelled, not applied"}

    def answer(env: Envelope, ident: bytes) -> dict[str, Any] | None:
        if env.type == c.HANDSHAKE:
            return welcome()
        if env.type == c.PROMPT:  # accepted and running, but the reply is late: the user presses Ctrl-C
            os.kill(os.getpid(), signal.SIGINT)
            return None
        if env.type == c.CLI_CANCEL:
            cancelled.append(dict(env.body))
            done = {"session_id": "s-1", "turn_id": env.body["turn_id"], "seq": 5, "kind": "turn_done"}
            server = servers[0]
            requested = {"turn_id": env.body["turn_id"], "state": "cancellation_requested"}
            server.send(ident, env.reply_ok(requested))
            event = Envelope(kind="cast", type=c.CLI_EVENT, body={**done, "data": {"result": outcome}})
            server.send(ident, event)
            return None
        return {"ok": True}

    home = GeodeHome(tmp_path / "gh").ensure()
    servers: list[FakeControl] = []
    with FakeControl(home, answer=answer) as fc:
        servers.append(fc)
        cl = ControlClient(home, client_version="test")
        try:
            cl.connect(timeout_s=5.0, is_tty=False, mode="IPC")
            t0 = time.monotonic()
            got = cl.run_prompt("run the slow command", timeout_s=30, on_interrupt=lambda: True)
            took = time.monotonic() - t0
        finally:
            cl.close()
    assert [x["turn_id"] for x in cancelled] == [got["turn_id"]]  # the cancel named our turn
    assert got["text"] == "run_bash: cancelled, not applied" and got["termination_reason"] == "user_cancelled"
    assert took < 5.0, took
