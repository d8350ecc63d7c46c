"""Issue 12, finding A, against the lanes actor in one process: a turn whose worker died is not pushed to
that dead incarnation again (a late heartbeat or READY of it), keeps its place by first submission, shows its
age and re-queue count in ``lanes.status``, and ends ``worker_lost`` after ``max_requeues`` losses."""

from __future__ import annotations

import threading
import time

from geode.lanes.queue import LaneQueue
from geode.lanes.records import MemoryTurnStore
from geode.protocol import lanes as lanes_msg
from geode.protocol import turns
from geode.records.models import TurnRecord, TurnState
from tests.lanes.harness import done, make, req, submit


def _heartbeat(name: str, inc: int, running: list[str] | None = None, free: int = 1):  # type: ignore[no-untyped-def]
    hb = turns.WorkerHeartbeat(worker=name, incarnation=inc, running=running or [], free=free)
    return req(turns.WORKER_HEARTBEAT, hb)


def test_a_late_heartbeat_of_a_dead_worker_does_not_take_the_turn_back() -> None:
    svc, tr, store = make()
    try:
        svc.worker_ready("loop-1", 1)
        submit(svc, "t1", "S")
        svc.child_died("loop-1", 1)
        svc.handle(_heartbeat("loop-1", 1))  # sent before it died, delivered after the supervisor's report
        svc.worker_ready("loop-1", 1)  # ... and a late READY of the same dead incarnation
        assert [(r["_worker"], r["attempt"]) for r in tr.runs()] == [("loop-1", 1)]  # today: pushed again
        assert svc.queued() == ["t1"]
        svc.worker_ready("loop-1", 2)
        assert [(r["_worker"], r["attempt"]) for r in tr.runs()] == [("loop-1", 1), ("loop-1", 2)]
        rec = store.get_turn("t1")
        assert rec is not None and rec.requeues == 1 and "_requeues" not in rec.input and rec.incarnation == 2
    finally:
        svc.stop()


def test_a_requeued_turn_keeps_its_place_after_a_lanes_restart() -> None:
    svc, _tr, store = make(queue=LaneQueue(global_cap=2))
    try:
        svc.worker_ready("loop-1", 1)
        svc.worker_ready("loop-2", 1)
        submit(svc, "a", "A")
        time.sleep(0.01)
        submit(svc, "b", "B")
        svc.child_died("loop-1", 1)
        svc.child_died("loop-2", 1)  # both re-queued, "a" first submitted
    finally:
        svc.stop()
    svc2, tr2, _ = make(store, queue=LaneQueue(global_cap=2))
    try:
        assert svc2.queued() == ["a", "b"]  # today: ["b", "a"] (each resume jumps to the very front)
        svc2.worker_ready("loop-1", 2)
        assert [r["turn_id"] for r in tr2.runs()] == ["a"]
    finally:
        svc2.stop()


def test_age_and_requeues_are_in_lanes_status_and_the_started_event() -> None:
    svc, tr, _ = make()
    try:
        svc.worker_ready("loop-1", 1)
        submit(svc, "t1", "S")
        svc.child_died("loop-1", 1)
        svc.worker_ready("loop-1", 2)
        turns_ = svc.status()["turns"]
        assert [(t["turn_id"], t["state"], t["requeues"], t["attempts"]) for t in turns_] == [
            ("t1", "running", 1, 2)
        ]
        assert turns_[0]["age_s"] >= 0.0
        started = [e for e in tr.to("control", lanes_msg.ORIGIN_EVENT) if e["kind"] == lanes_msg.TURN_STARTED]
        assert [e["data"]["requeues"] for e in started] == [0, 1]
    finally:
        svc.stop()


def test_a_turn_whose_workers_keep_dying_ends_worker_lost() -> None:
    svc, tr, store = make(max_requeues=2)
    try:
        submit(svc, "t0", "S")
        for inc in range(1, 4):  # two losses are re-queued, the third ends it
            svc.worker_ready("loop-1", inc)
            assert tr.runs()[-1]["attempt"] == inc
            svc.child_died("loop-1", inc)
        rec = store.get_turn("t0")
        assert rec is not None and rec.state == TurnState.DONE
        assert (rec.outcome or {})["termination_reason"] == "worker_lost"
        assert svc.running() == [] and svc.queued() == []
        events = tr.to("control", lanes_msg.ORIGIN_EVENT)
        done_events = [e for e in events if e["kind"] == lanes_msg.TURN_DONE]
        assert [e["data"]["result"]["termination_reason"] for e in done_events] == ["worker_lost"]
        svc.worker_ready("loop-1", 4)
        submit(svc, "t2", "S")  # the lane is free again
        done(svc, "t2", "S", "loop-1")
        assert store.get_turn("t2").state == TurnState.DONE  # type: ignore[union-attr]
    finally:
        svc.stop()


class _SlowRunningWrite(MemoryTurnStore):
    """The running record's write waits until ``release`` (a store slow while it restarts)."""

    def __init__(self) -> None:
        super().__init__()
        self.holding, self.release = threading.Event(), threading.Event()

    def put_turn(self, turn: TurnRecord) -> TurnRecord:
        if turn.state == TurnState.RUNNING and not self.release.is_set():
            self.holding.set()
            self.release.wait(10)
        return super().put_turn(turn)


def test_a_slow_running_write_does_not_make_a_pushed_turn_look_lost() -> None:
    clock = [0.0]
    store = _SlowRunningWrite()
    svc, tr, _ = make(store, clock=lambda: clock[0])
    try:
        svc.worker_ready("loop-1", 1)
        body = lanes_msg.Submit(turn_id="t1", session_id="S", origin="control", input={"text": "t1"})
        # answered once its first record (the running one: it starts at once) is stored, so from a thread
        threading.Thread(target=svc.lanes.handle, args=(req(lanes_msg.SUBMIT, body),), daemon=True).start()
        assert store.holding.wait(5), "the running record's write never started"
        clock[0] = 5.0  # the write took 5 s; the run is pushed only now
        store.release.set()
        assert tr.wait_for(lambda: len(tr.runs()) == 1, 5)
        svc.lanes.settle()
        svc.handle(_heartbeat("loop-1", 1, free=0))  # sent before the run arrived: it does not list t1
        assert [r["attempt"] for r in tr.runs()] == [1]  # today: re-queued and pushed again (a bounce)
        assert svc.running() == ["t1"]
    finally:
        svc.stop()
