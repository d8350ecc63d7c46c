"""Lanes relays a worker's events to the turn's origin without a pydantic pass per frame (issue 34 session 5,
RELAY): each event's body is read off the model it built (``event_wire``), no ``StreamEvents`` model is built
to be dumped at once. Counted: model dumps of stream events per relayed frame. What the origin gets is what
the dump gave, and it validates as before."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from geode.lanes.stream import SEEN_PER_TURN, Reorder
from geode.protocol import catalog, turns
from geode.protocol import lanes as lanes_msg
from tests.lanes.harness import make, submit


def _ev(seq: int, kind: turns.TurnEventKind, **data: Any) -> turns.TurnEvent:
    return turns.TurnEvent(session_id="S", turn_id="t1", seq=seq, kind=kind, data=data)


def test_a_relayed_batch_reaches_the_origin_without_a_dump(monkeypatch: pytest.MonkeyPatch) -> None:
    svc, tr, _ = make()
    svc.worker_ready("loop-1", 1)
    submit(svc, "t1", "S")
    dumps: list[str] = []
    dump = BaseModel.model_dump

    def counted(model: BaseModel, *a: Any, **kw: Any) -> Any:
        if isinstance(model, lanes_msg.StreamEvent | lanes_msg.StreamEvents):
            dumps.append(type(model).__name__)
        return dump(model, *a, **kw)

    monkeypatch.setattr(BaseModel, "model_dump", counted)
    before = len(tr.casts)
    assert svc.lanes.relay is not None
    svc.lanes.relay(
        [_ev(1, turns.TurnEventKind.TOOL_START, name="glob_files", nested={"a": [1, None]})], "loop-1#1"
    )
    svc.lanes.relay(
        [_ev(2, turns.TurnEventKind.TOOL_END, ok=True), _ev(3, turns.TurnEventKind.TOKENS)], "loop-1#1"
    )
    sent = tr.casts[before:]
    assert [(t, ty) for t, ty, _ in sent] == [
        ("control", lanes_msg.ORIGIN_EVENT),
        ("control", lanes_msg.ORIGIN_EVENTS),
    ]
    assert dumps == []  # before: the event (1), then a StreamEvents built and dumped (2)
    one, batch = sent[0][2], sent[1][2]
    assert one == catalog.dump(lanes_msg.StreamEvent.model_validate(one))  # as the dump gave it
    assert batch == catalog.dump(lanes_msg.StreamEvents.model_validate(batch))
    assert one["data"] == {"name": "glob_files", "nested": {"a": [1, None]}}
    assert [e["kind"] for e in batch["events"]] == ["tool_end", "tokens"]
    seqs = [one["seq"], *(e["seq"] for e in batch["events"])]
    assert seqs == sorted(seqs) and len(set(seqs)) == 3


class _Seq(int):
    """A seq that counts the comparisons made with it (the deque's membership test compared each one)."""

    compared = 0

    def __eq__(self, other: object) -> bool:
        _Seq.compared += 1
        return int(self) == other

    __hash__ = int.__hash__


def test_a_long_turns_next_event_is_checked_for_a_repeat_in_constant_work() -> None:
    reorder = Reorder()
    for n in range(1, 201):  # a long turn: 200 events seen
        assert reorder.push("t1", _Seq(n), n, now=0.0) == [n]
    _Seq.compared = 0
    assert reorder.push("t1", _Seq(201), 201, now=0.0) == [201]
    assert _Seq.compared <= 2  # before: 200, one per seq seen (a scan of the turn's history per event)
    assert reorder.push("t1", _Seq(150), 150, now=0.0) == []  # a repeat is still dropped
    for n in range(202, 202 + SEEN_PER_TURN):
        reorder.push("t1", n, n, now=0.0)
    assert reorder.push("t1", 150, 150, now=0.0) == [150]  # forgotten past the window, as before
