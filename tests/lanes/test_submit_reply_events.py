"""A submit that asks for them (``Submit.reply_events``, control's) gets the first stream events of a turn
that starts at once (``turn_queued``, ``turn_started``) in its reply, numbered and buffered as if sent, and
no ``origin.events`` frame carries them (issue 34 session 6: a frame fewer per turn in lanes and control);
a retried submit gets them again; a submit without the flag (messengers, the scheduler) is served as
before."""

from __future__ import annotations

from geode.protocol import lanes as lanes_msg
from tests.lanes.harness import done, make, submit


def test_the_reply_carries_the_first_events_and_no_frame_does() -> None:
    svc, tr, _ = make()
    try:
        svc.worker_ready("loop-1", 1)
        first = submit(svc, "t1", "S", reply_events=True)
        assert first.state == "running" and [r["turn_id"] for r in tr.runs()] == ["t1"]
        assert first.events is not None
        assert [e.kind for e in first.events] == [lanes_msg.TURN_QUEUED, lanes_msg.TURN_STARTED]
        assert first.events[1].seq == first.events[0].seq + 1 and first.events[1].data["worker"] == "loop-1"
        assert (
            tr.to("control", lanes_msg.ORIGIN_EVENTS) == [] and tr.to("control", lanes_msg.ORIGIN_EVENT) == []
        )
        again = submit(svc, "t1", "S", reply_events=True)  # a retry (its first reply lost): the same events
        assert again.events == first.events
        rep = svc.replay(lanes_msg.Replay(session_id="S", after_seq=0))  # buffered as if they were sent
        assert [e.seq for e in rep.events] == [e.seq for e in first.events]
        done(svc, "t1", "S", "loop-1")
        [end] = tr.to("control", lanes_msg.ORIGIN_EVENT)
        assert end["kind"] == lanes_msg.TURN_DONE and end["seq"] == first.events[1].seq + 1
    finally:
        svc.stop()


def test_a_submit_without_the_flag_is_served_as_before() -> None:
    svc, tr, _ = make()
    try:
        svc.worker_ready("loop-1", 1)
        plain = submit(svc, "t1", "S")
        assert plain.state == "running" and plain.events is None
        [frame] = tr.to("control", lanes_msg.ORIGIN_EVENTS)
        assert [e["kind"] for e in frame["events"]] == [lanes_msg.TURN_QUEUED, lanes_msg.TURN_STARTED]
        behind = submit(svc, "t2", "S")  # waits behind t1: its queued event is sent
        assert (behind.state, behind.events) == ("queued", None)
        assert [e["kind"] for e in tr.casts_of("control", lanes_msg.ORIGIN_EVENT)] == [lanes_msg.TURN_QUEUED]
    finally:
        svc.stop()


def test_a_queued_turn_s_reply_carries_its_queued_event_and_its_start_is_sent() -> None:
    """TURNFRAMES (session 6): a turn that waits has its ``turn_queued`` in the reply too (a frame fewer per
    queued turn); its ``turn_started`` comes later, live, with the next seq."""
    svc, tr, _ = make()
    try:
        svc.worker_ready("loop-1", 1)
        submit(svc, "t1", "S", reply_events=True)
        behind = submit(svc, "t2", "S", reply_events=True)  # waits behind t1
        assert behind.state == "queued" and behind.events is not None
        [queued] = behind.events
        assert (queued.kind, queued.turn_id, queued.data) == (lanes_msg.TURN_QUEUED, "t2", {"position": 1})
        assert tr.casts_of("control", lanes_msg.ORIGIN_EVENT) == []
        assert tr.to("control", lanes_msg.ORIGIN_EVENTS) == []
        again = submit(svc, "t2", "S", reply_events=True)  # a retry: the same event again
        assert again.events == behind.events
        done(svc, "t1", "S", "loop-1")  # t1's end, then t2 starts: both live, after the queued event
        live = [e for f in tr.to("control", lanes_msg.ORIGIN_EVENTS) for e in f["events"]]
        live += tr.to("control", lanes_msg.ORIGIN_EVENT)
        started = [e for e in live if e["kind"] == lanes_msg.TURN_STARTED and e["turn_id"] == "t2"]
        assert len(started) == 1 and started[0]["seq"] > queued.seq
    finally:
        svc.stop()
