"""A turn's ``turn.done`` carries the events the loop still held at its end (issue 34 session 6, TURNFRAMES):
lanes relays them as a ``turn.events`` frame's, before its own ``turn_done``, so the origin gets the same
events in the same order as when they came in a frame of their own; a retried done relays nothing again."""

from __future__ import annotations

from geode.protocol import lanes as lanes_msg
from geode.protocol import turns
from tests.lanes.test_event_batches import K, Rig, _batch, _sync, rig
from tests.waiting import poll_for

__all__ = ["rig"]  # the fixture, shared with test_event_batches


def _done(*events: tuple[int, turns.TurnEventKind], worker: str = "loop-1") -> turns.TurnDone:
    result = turns.TurnResult(text="ok", termination_reason=turns.TerminationReason.NATURAL)
    return turns.TurnDone(
        turn_id="t-1",
        session_id="s-1",
        worker=worker,
        incarnation=1,
        result=result,
        events=_batch(*events).events if events else [],
    )


def _kinds(rig: Rig, since: int) -> list[tuple[str, list[object]]]:
    return [(t, [e["kind"] for e in evs]) for t, evs in rig.frames[since:]]


def _ended(rig: Rig) -> bool:
    return any(e["kind"] == lanes_msg.TURN_DONE for e in rig.events())


def test_the_done_s_events_and_the_turn_done_reach_the_origin_as_one_frame_in_order(rig: Rig) -> None:
    before = len(rig.frames)
    w = rig.worker.transport
    w.cast("lanes", turns.TURN_EVENTS, _batch((1, K.TOOL_END), (2, K.ROUND_START)), session="s-1")
    _sync(rig.worker)
    w.call("lanes", turns.TURN_DONE, _done((3, K.TOKENS), (4, K.VERIFY), (5, K.TERMINATION)), session="s-1")
    poll_for(lambda: _ended(rig), 10, what="the done")
    assert _kinds(rig, before) == [
        (lanes_msg.ORIGIN_EVENTS, ["tool_end", "round_start"]),
        (lanes_msg.ORIGIN_EVENTS, ["tokens", "verify", "termination", lanes_msg.TURN_DONE]),
    ]
    new = [e for _, evs in rig.frames[before:] for e in evs]
    assert [e["data"].get("n") for e in new] == [1, 2, 3, 4, 5, None]
    seqs = [e["seq"] for e in new]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
    after = len(rig.frames)
    w.call("lanes", turns.TURN_DONE, _done((3, K.TOKENS), (4, K.VERIFY), (5, K.TERMINATION)), session="s-1")
    _sync(rig.worker)
    rig.lanes.tell("tick")
    _sync(rig.worker)
    assert rig.frames[after:] == []  # a retried done (lanes answered it already): nothing relayed again


def test_a_stale_worker_s_done_relays_none_of_its_events(rig: Rig) -> None:
    before = len(rig.frames)
    rig.worker.transport.call("lanes", turns.TURN_DONE, _done((1, K.TERMINATION), worker="loop-9"))
    _sync(rig.worker)
    rig.lanes.tell("tick")
    _sync(rig.worker)
    assert rig.frames[before:] == []  # the turn is loop-1's: loop-9 lost it, its end is not the turn's
