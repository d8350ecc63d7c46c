"""With no ``[lanes] global_cap`` set, lanes' cap follows the capacity the registered loop workers offer, up
to ``max_global_cap``; a worker host that leaves lowers it and no turn running elsewhere is cancelled."""

from __future__ import annotations

from geode.protocol import turns
from tests.lanes.harness import done, make, submit


def _cap(svc: object) -> int:
    return int(svc.status()["lanes"]["global_cap"])  # type: ignore[attr-defined]


def test_the_cap_follows_registered_capacity_up_to_the_ceiling() -> None:
    svc, tr, _ = make(cap_ceiling=5)
    try:
        svc.worker_ready("loop-1", 1, capacity=2)
        assert _cap(svc) == 2 and svc.status()["lanes"]["global_cap_follows"] is True
        svc.worker_ready("w1/loop-1", 1, capacity=2)
        assert _cap(svc) == 4
        for i in range(6):
            submit(svc, f"t{i}", f"S{i}")
        assert len(svc.running()) == 4 and len(tr.runs()) == 4  # the joined host's slots are used
        svc.worker_ready("w2/loop-1", 1, capacity=2)
        assert _cap(svc) == 5  # 6 offered, the ceiling bounds it (and provider spend with it)
        assert len(svc.running()) == 5
    finally:
        svc.stop()


def test_a_host_leaving_lowers_the_cap_without_cancelling_running_turns() -> None:
    svc, tr, _ = make(cap_ceiling=64)
    try:
        svc.worker_ready("loop-1", 1, capacity=2)
        svc.worker_ready("w1/loop-1", 1, capacity=2)
        for i in range(5):
            submit(svc, f"t{i}", f"S{i}")
        on_main = [r["turn_id"] for r in tr.runs() if r["_worker"] == "loop-1"]
        assert len(svc.running()) == 4 and len(on_main) == 2
        svc.child_died("w1/loop-1", 1)  # the host left: its two turns go back to the queue
        assert _cap(svc) == 2
        assert sorted(svc.running()) == sorted(on_main)  # main's turns run on, none cancelled
        assert tr.to("loop-1", turns.TURN_CANCEL) == []
        done(svc, on_main[0], f"S{on_main[0][1:]}", "loop-1")
        assert len(svc.running()) == 2  # a freed slot goes to a re-queued turn, within the lower cap
    finally:
        svc.stop()


def test_a_set_global_cap_is_kept() -> None:
    svc, _tr, _ = make()  # no ceiling: the configured cap (here the queue's default 4) stays
    try:
        svc.worker_ready("loop-1", 1, capacity=16)
        assert _cap(svc) == 4 and svc.status()["lanes"]["global_cap_follows"] is False
    finally:
        svc.stop()
