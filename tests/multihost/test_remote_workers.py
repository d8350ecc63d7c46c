"""Issue 17 (D), lanes in one process: host-qualified loop workers (``w1/loop-1``) take turns; a silent
remote worker's turn is re-queued (resume) on another worker and its late heartbeat is refused, so it
restarts as a new incarnation instead of resuming the same one (a local worker may still come back)."""

from __future__ import annotations

from geode.protocol import turns
from tests.lanes.harness import make, submit


def _hb(svc, name: str, inc: int, running: list[str]) -> turns.Ack:  # type: ignore[no-untyped-def]
    body = turns.WorkerHeartbeat(worker=name, incarnation=inc, running=running)
    return svc.call(turns.WORKER_HEARTBEAT, body)


def test_a_silent_remote_worker_is_dead_for_good_and_its_turn_resumes_elsewhere() -> None:
    clock = [0.0]
    svc, tr, _ = make(clock=lambda: clock[0])
    svc.worker_ready("w1/loop-1", 1)
    submit(svc, "t1", "S")
    assert [r["_worker"] for r in tr.runs()] == ["w1/loop-1"]
    clock[0] = 10.0  # the link is cut: no heartbeat for 10 s
    svc.worker_ready("loop-1", 1)
    svc.tick()
    assert [(r["_worker"], r.get("resume", False)) for r in tr.runs()] == [
        ("w1/loop-1", False),
        ("loop-1", True),
    ]
    assert _hb(svc, "w1/loop-1", 1, ["t1"]) .ok is False  # the link is back: that incarnation is gone
    assert "w1/loop-1" not in [w["worker"] for w in svc.status()["workers"]]
    svc.worker_ready("w1/loop-1", 2)  # its supervisor restarted it: it rejoins with a new incarnation
    assert ("w1/loop-1", 2) in [(w["worker"], w["incarnation"]) for w in svc.status()["workers"]]
    assert len(tr.runs()) == 2  # nothing was sent again blindly


def test_a_silent_local_worker_may_come_back() -> None:
    clock = [0.0]
    svc, _tr, _ = make(clock=lambda: clock[0])
    svc.worker_ready("loop-1", 1)
    clock[0] = 10.0
    svc.tick()
    assert _hb(svc, "loop-1", 1, []).ok is True
    assert "loop-1" in [w["worker"] for w in svc.status()["workers"]]
