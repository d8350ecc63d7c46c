"""A turn's last batch (its ``termination``) and lanes' ``turn_done`` reach the origin as one frame (issue 34
session 4, RELAY), over real buses with the real lanes actor: in seq order, nothing lost when no done comes,
and held events go out before any later event of their session."""

from __future__ import annotations

from types import SimpleNamespace

from geode.lanes.stream_relay import send_events
from geode.protocol import lanes as lanes_msg
from geode.protocol import turns
from geode.protocol.errors import BadRequest
from tests.lanes.test_event_batches import K, Rig, _batch, _sync, rig
from tests.waiting import poll_for

__all__ = ["rig"]  # the fixture, shared with test_event_batches


def _done() -> turns.TurnDone:
    result = turns.TurnResult(text="ok", termination_reason=turns.TerminationReason.NATURAL)
    return turns.TurnDone(turn_id="t-1", session_id="s-1", worker="loop-1", incarnation=1, result=result)


def _kinds(frames: list[tuple[str, list[dict[str, object]]]]) -> list[tuple[str, list[object]]]:
    return [(t, [e["kind"] for e in evs]) for t, evs in frames]


def test_the_last_batch_and_the_done_reach_the_origin_as_one_frame(rig: Rig) -> None:
    before = len(rig.frames)
    w = rig.worker.transport
    w.cast("lanes", turns.TURN_EVENTS, _batch((1, K.TOKENS), (2, K.TERMINATION)), session="s-1")
    _sync(rig.worker)
    w.call("lanes", turns.TURN_DONE, _done(), session="s-1")
    poll_for(lambda: any(e["kind"] == lanes_msg.TURN_DONE for e in rig.events()), 10, what="the done")
    new = rig.frames[before:]
    assert _kinds(new) == [(lanes_msg.ORIGIN_EVENTS, ["tokens", "termination", lanes_msg.TURN_DONE])]
    seqs = [e["seq"] for e in new[0][1]]
    assert seqs == sorted(seqs) and len(set(seqs)) == 3  # before: two frames, the done alone


def test_a_held_end_goes_out_with_the_tick_when_no_done_follows(rig: Rig) -> None:
    w = rig.worker.transport
    w.cast("lanes", turns.TURN_EVENTS, _batch((1, K.TOKENS), (2, K.TERMINATION)), session="s-1")
    _sync(rig.worker)

    def sent() -> bool:
        rig.lanes.tell("tick")
        return any(e["kind"] == "termination" for e in rig.events())

    poll_for(sent, 10, interval_s=0.1, what="the held end sent by the tick")
    assert [e["data"]["n"] for e in rig.events() if "n" in e["data"]] == [1, 2]


def test_a_later_event_of_the_session_goes_after_the_held_end(rig: Rig) -> None:
    w = rig.worker.transport
    w.cast("lanes", turns.TURN_EVENTS, _batch((1, K.TOKENS), (2, K.TERMINATION)), session="s-1")
    _sync(rig.worker)
    sub = lanes_msg.Submit(turn_id="t-2", session_id="s-1", origin="origin", input={"text": "next"})
    w.call("lanes", lanes_msg.SUBMIT, sub, session="s-1")  # its lane is busy: queued, an event now
    poll_for(
        lambda: any(e["kind"] == lanes_msg.TURN_QUEUED and e["turn_id"] == "t-2" for e in rig.events()), 10
    )
    evs = rig.events()
    seqs = [e["seq"] for e in evs]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)  # the origin would drop a lower seq as seen
    kinds = [e["kind"] for e in evs if e["turn_id"] == "t-2" or "n" in e["data"]]
    assert kinds == ["tokens", "termination", lanes_msg.TURN_QUEUED]


class _CapTransport:
    """Refuses a multi-event frame as over the cap (as codec.encode does for a long answer's done)."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, int]] = []

    def cast(self, target: str, type_: str, body: object, *, session: str | None = None) -> None:
        if type_ == lanes_msg.ORIGIN_EVENTS:
            raise BadRequest("frame of 1100000 bytes exceeds the 1048576-byte cap")
        assert isinstance(body, dict) and lanes_msg.StreamEvent.model_validate(body)
        self.sent.append((type_, body["seq"]))


def test_an_end_and_done_over_the_cap_together_go_one_to_a_frame() -> None:
    state = SimpleNamespace(held_ends={}, transport=_CapTransport())
    evs = [lanes_msg.StreamEvent(session_id="s", turn_id="t", seq=n, kind="tokens") for n in (1, 2, 3)]
    state.held_ends["s"] = ("origin", evs[:2], 0.0)
    send_events(state, "origin", "s", evs[2:])  # type: ignore[arg-type]
    assert state.transport.sent == [
        (lanes_msg.ORIGIN_EVENT, 1),
        (lanes_msg.ORIGIN_EVENT, 2),
        (lanes_msg.ORIGIN_EVENT, 3),
    ]
    assert state.held_ends == {}
