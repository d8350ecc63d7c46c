"""A loop worker's ``turn.done`` carries the turn's last events (geode/loop/turn_reports.py, TURNFRAMES s6);
a done refused as over the frame cap with them sends them alone first, then the done without them."""

from __future__ import annotations

import threading
from typing import Any

from geode.loop.turn_reports import LanesSink, report_done
from geode.protocol import turns
from geode.protocol.errors import BadRequest

K = turns.TurnEventKind


class _Lanes:
    """A transport whose first ``turn.done`` carrying events is refused as too large."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, Any]] = []

    def cast(self, target: str, type_: str, body: Any, *, session: str | None = None) -> None:
        self.sent.append((type_, body))

    def call(self, target: str, type_: str, body: Any, **_kw: Any) -> Any:
        self.sent.append((type_, body))
        if isinstance(body, turns.TurnDone) and body.events:
            raise BadRequest("frame of 1100000 bytes exceeds the 1048576-byte cap")
        return {"ok": True}


def _done(*kinds: turns.TurnEventKind) -> turns.TurnDone:
    events = [turns.TurnEvent(session_id="s", turn_id="t", seq=i, kind=k) for i, k in enumerate(kinds, 1)]
    result = turns.TurnResult(text="x" * 10, termination_reason=turns.TerminationReason.NATURAL)
    return turns.TurnDone(turn_id="t", session_id="s", worker="loop-1", result=result, events=events)


def test_a_done_too_large_with_its_events_sends_them_alone_first() -> None:
    lanes = _Lanes()
    report_done(LanesSink(lanes), _done(K.TOKENS, K.TERMINATION), threading.Event())  # type: ignore[arg-type]
    types = [t for t, _ in lanes.sent]
    assert types == [turns.TURN_DONE, turns.TURN_EVENTS, turns.TURN_DONE]
    assert [e.kind for e in lanes.sent[1][1].events] == [K.TOKENS, K.TERMINATION]
    assert lanes.sent[2][1].events == []


def test_a_done_with_its_events_goes_as_one_call() -> None:
    lanes = _Lanes()
    lanes.call = lambda target, type_, body, **kw: lanes.sent.append((type_, body))  # type: ignore[method-assign]
    report_done(LanesSink(lanes), _done(K.VERIFY, K.TERMINATION), threading.Event())  # type: ignore[arg-type]
    assert [(t, len(b.events)) for t, b in lanes.sent] == [(turns.TURN_DONE, 2)]
