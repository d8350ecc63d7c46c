"""One catch-up in flight per client: a ``cli.attach`` whose reply did not come in time (a slow control:
lanes' replay and the store's fallback, behind the connection's queue) is still run by control, so the next
catch-up waits for that reply, or takes it when it came meanwhile, instead of sending another attach behind
it (issue 34: a "catch-up storm" under load, one more attach every 0.5 s of quiet per client)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from actors.cli.client import ControlClient
from geode.protocol import control as c
from geode.protocol.envelope import Envelope
from geode.protocol.errors import RequestTimeout
from tests.cli.fake_control import FakeControl, connected_client, welcome

OUTCOME = {"termination_reason": "natural", "text": "the answer a slow replay brought"}
PROMPTED = {"turn_id": "t-1", "session_id": "s-1", "position": 0}
LATE = c.Attached(
    session_id="s-1",
    replayed=0,
    complete=False,
    outcomes=[{"turn_id": "t-1", "state": "done", "outcome": OUTCOME}],
).model_dump()


class _HeldAttach:
    """Every ``cli.attach`` is held: its reply is sent ``LATE_S`` after it came (past the client's 2 s wait
    in ``follow``), or at the next request (a ping), before that request's own reply."""

    LATE_S = 2.5

    def __init__(self) -> None:
        self.fc: FakeControl | None = None
        self.attaches: list[int] = []  # each attach's after_seq
        self.held: list[tuple[bytes, Envelope]] = []
        self.late_s: float | None = None  # None: only the next request releases it

    def release(self) -> None:
        assert self.fc is not None
        for ident, env in self.held:
            self.fc.send(ident, env.reply_ok(LATE))
        self.held.clear()

    def __call__(self, env: Envelope, ident: bytes) -> dict[str, Any] | None:
        assert self.fc is not None
        if env.type == c.HANDSHAKE:
            return welcome()
        if env.type == c.PROMPT:
            return PROMPTED
        if env.type == c.ATTACH:
            self.attaches.append(int(env.body["after_seq"]))
            if self.late_s is not None:
                self.fc.send_later(self.late_s, ident, env.reply_ok(LATE))
            else:
                self.held.append((ident, env))
            return None
        self.release()
        return {"ok": True}


@contextmanager
def _connected(tmp_path: Path) -> Iterator[tuple[ControlClient, _HeldAttach]]:
    held = _HeldAttach()
    with connected_client(tmp_path, held) as cl:
        yield cl, held


def test_the_next_catch_up_takes_the_late_reply_and_sends_no_second_attach(tmp_path: Path) -> None:
    with _connected(tmp_path) as (cl, held):
        with pytest.raises(RequestTimeout):
            cl.catch_up(timeout_s=0.3)  # held: no reply in time
        cl.request(c.PING, {})  # releases the attach's reply first: it comes while nobody waits for it
        got = cl.catch_up(timeout_s=5.0)
    assert held.attaches == [0]  # before: a second attach, queued behind the first on control's side
    assert [(e["turn_id"], e["data"]["result"]) for e in got] == [("t-1", OUTCOME)]


def test_a_catch_up_waits_for_the_attach_in_flight(tmp_path: Path) -> None:
    with _connected(tmp_path) as (cl, held):
        with pytest.raises(RequestTimeout):
            cl.catch_up(timeout_s=0.3)
        with pytest.raises(RequestTimeout):  # still held: the next catch-up waited for it, sent nothing
            cl.catch_up(timeout_s=0.3)
    assert held.attaches == [0]


def test_follow_answers_from_a_timed_out_catch_ups_late_reply(tmp_path: Path) -> None:
    """The quiet stream's catch-up times out (2 s); its reply comes after (2.5 s after the attach) and
    carries the turn's durable outcome: ``follow``'s next catch-up waits for it and answers with it, and no
    second attach is sent (before: one every 2.5 s, each queued behind the last on control's side)."""
    with _connected(tmp_path) as (cl, held):
        held.late_s = held.LATE_S
        accepted = cl.request(c.PROMPT, {"text": "hi", "session_id": "s-1"})
        result = cl.follow(accepted["turn_id"], timeout_s=15.0)
    assert result["text"] == OUTCOME["text"] and result["turn_id"] == "t-1", result
    assert held.attaches == [0]


def test_a_new_handshake_sends_a_new_attach(tmp_path: Path) -> None:
    """``reattach`` (a restarted control: the old attach died with it) never waits for the old one."""
    with _connected(tmp_path) as (cl, held):
        with pytest.raises(RequestTimeout):
            cl.catch_up(timeout_s=0.3)
        with pytest.raises(RequestTimeout):
            cl.reattach(timeout_s=0.3)
    assert held.attaches == [0, 0]
