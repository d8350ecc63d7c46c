"""A turn's ``turn_done`` that arrives while a catch-up's ``cli.attach`` is waiting for its reply, and that
reply never comes in time (a slow control: lanes' replay and the store's fallback take 1.8 s, plus its
queue): the client still answers with it. Before, the event went into the failed catch-up's own list and was
dropped with it, after being counted as seen (``last_seq``), so no later replay brought it again: the client
waited out its deadline although the turn had ended (issue 34: 14 of 200 turns at 100 sessions under load,
``TurnContinues: timeout: turn … did not finish within 30s``)."""

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

OUTCOME = {"termination_reason": "natural", "text": "done during a slow catch-up"}
PROMPTED = {"turn_id": "t-1", "session_id": "s-1", "position": 0}


class _SlowAttach:
    """The first ``cli.attach`` is never answered, and the turn's live ``turn_done`` (seq 7) is pushed while
    it waits; every later attach replays nothing after seq 7 (there is nothing newer), complete."""

    def __init__(self) -> None:
        self.fc: FakeControl | None = None
        self.attaches: list[int] = []  # each attach's after_seq

    def __call__(self, env: Envelope, ident: bytes) -> dict[str, Any] | None:
        assert self.fc is not None
        if env.type == c.HANDSHAKE:
            return welcome()
        if env.type == c.PROMPT:
            return PROMPTED
        if env.type == c.ATTACH:
            self.attaches.append(int(env.body["after_seq"]))
            if len(self.attaches) == 1:  # held: its reply is late (past the client's wait)
                done = {"session_id": "s-1", "turn_id": "t-1", "seq": 7, "kind": "turn_done"}
                body = {**done, "data": {"result": OUTCOME}}
                self.fc.send(ident, Envelope(kind="cast", type=c.CLI_EVENT, body=body))
                return None
            return c.Attached(session_id="s-1", replayed=0, complete=True).model_dump()
        return {"ok": True}


@contextmanager
def _connected(tmp_path: Path) -> Iterator[tuple[ControlClient, _SlowAttach]]:
    """A client connected to a fake control whose first ``cli.attach`` is never answered."""
    slow = _SlowAttach()
    with connected_client(tmp_path, slow) as cl:
        yield cl, slow


def test_a_live_turn_done_during_a_timed_out_catch_up_is_not_lost(tmp_path: Path) -> None:
    with _connected(tmp_path) as (cl, slow):
        accepted = cl.request(c.PROMPT, {"text": "hi", "session_id": "s-1"})
        result = cl.follow(accepted["turn_id"], timeout_s=8.0)  # before: RequestTimeout after 8 s
    assert result["termination_reason"] == "natural" and result["turn_id"] == "t-1", result
    assert result["text"] == OUTCOME["text"]
    assert slow.attaches[0] == 0  # the quiet stream's catch-up, whose reply never came


def test_a_failed_catch_up_leaves_its_events_in_the_inbox(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``catch_up`` itself: it raises (no reply in time), and the event it took is in the inbox, once. (The
    unanswered attach is given up at once here, so the next catch-up asks anew: tests/cli/
    test_one_catch_up_in_flight.py has a next catch-up wait for the one in flight.)"""
    monkeypatch.setattr("actors.cli.control_socket.ATTACH_PATIENCE_S", 0.0)
    with _connected(tmp_path) as (cl, slow):
        with pytest.raises(RequestTimeout):  # the first attach is never answered
            cl.catch_up(timeout_s=0.5)
        assert [e["seq"] for e in cl.inbox] == [7] and cl.last_seq == {"s-1": 7}
        assert cl.catch_up(timeout_s=5.0) == []  # the next replay starts after it: nothing again
        assert slow.attaches == [0, 7]
