"""LaneQueue invariants: one running turn per session, FIFO behind it, a global cap, bounded queues."""

from __future__ import annotations

import random

import pytest

from geode.lanes.pool import WorkerPool
from geode.lanes.queue import LaneQueue
from geode.protocol.errors import Conflict, NotFound, Overloaded


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def test_one_running_turn_per_session_fifo_behind_it() -> None:
    q = LaneQueue(global_cap=10)
    for t in ("a1", "a2", "a3"):
        q.enqueue(t, "A")
    assert [g.turn_id for g in q.grant()] == ["a1"]
    assert q.grant() == []
    assert q.release("a1")
    assert [g.turn_id for g in q.grant()] == ["a2"]
    q.release("a2")
    assert [g.turn_id for g in q.grant()] == ["a3"]


def test_sessions_run_concurrently_up_to_global_cap_in_arrival_order() -> None:
    q = LaneQueue(global_cap=2)
    for i, s in enumerate("ABCD"):
        q.enqueue(f"t{i}", s)
    assert [g.session_id for g in q.grant()] == ["A", "B"]
    assert q.grant() == []
    q.release("t1")
    assert [g.session_id for g in q.grant()] == ["C"]
    assert len(q.running()) == 2


def test_grant_limit_respects_free_workers() -> None:
    q = LaneQueue(global_cap=5)
    for s in "ABC":
        q.enqueue(s, s)
    assert len(q.grant(limit=1)) == 1
    assert len(q.grant(limit=0)) == 0
    assert len(q.grant()) == 2


def test_bounded_session_fifo_overloaded() -> None:
    q = LaneQueue(global_cap=1, session_queue_max=2)
    q.enqueue("1", "A")
    q.enqueue("2", "A")
    with pytest.raises(Overloaded):
        q.enqueue("3", "A")
    q.enqueue("b", "B")  # other sessions unaffected


def test_enqueue_is_idempotent_and_conflicts_across_sessions() -> None:
    q = LaneQueue()
    q.enqueue("t", "A")
    q.enqueue("t", "A")
    assert q.queued() == ["t"]
    with pytest.raises(Conflict):
        q.enqueue("t", "B")


def test_requeue_puts_a_dead_workers_turn_first() -> None:
    q = LaneQueue(global_cap=1)
    q.enqueue("a1", "A")
    q.enqueue("b1", "B")
    q.enqueue("a2", "A")
    assert [g.turn_id for g in q.grant()] == ["a1"]
    assert q.requeue("a1")
    assert q.queued()[0] == "a1"
    assert [g.turn_id for g in q.grant()] == ["a1"]
    assert not q.requeue("zzz")


def test_remove_queued_and_release_unknown() -> None:
    q = LaneQueue()
    q.enqueue("t", "A")
    assert q.remove("t") == "A"
    with pytest.raises(NotFound):
        q.remove("t")
    assert not q.release("t")
    assert q.stats()["queued"] == 0


def test_state_is_bounded_lanes_forgotten_when_idle() -> None:
    q = LaneQueue(global_cap=100)
    for i in range(500):
        q.enqueue(f"t{i}", f"s{i}")
    while grants := q.grant():
        for g in grants:
            q.release(g.turn_id)
    assert not q._lanes and not q._entries  # nothing per-session outlives its work


def test_stats_report_waits_queue_lengths_held_lanes() -> None:
    clock = Clock()
    q = LaneQueue(global_cap=1, clock=clock)
    q.enqueue("a1", "A")
    q.enqueue("a2", "A")
    clock.t = 2.0
    q.grant()
    clock.t = 5.0
    st = q.stats()
    assert (
        st["running"] == 1 and st["queued"] == 1 and st["queue_lengths"] == [{"session_id": "A", "queued": 1}]
    )
    assert st["held_lanes"] == [{"session_id": "A", "turn_id": "a1", "held_s": 3.0, "queued": 1}]
    assert st["wait_max_s"] == 2.0 and st["oldest_queued_s"] == 5.0


def test_adopt_running_counts_against_the_cap() -> None:
    q = LaneQueue(global_cap=1)
    q.adopt_running("r", "A")
    q.enqueue("b", "B")
    assert q.grant() == []
    with pytest.raises(Conflict):
        q.adopt_running("r2", "A")


def test_random_interleaving_never_breaks_invariants() -> None:
    """The queue is single-threaded by contract (the lanes actor owns it): any order of its operations,
    including held turns released later, keeps one running turn per session and the global cap."""
    q = LaneQueue(global_cap=3, session_queue_max=1000)
    rnd = random.Random(11)
    running: dict[str, str] = {}
    held: list[str] = []
    for i in range(3000):
        op = rnd.random()
        if op < 0.4:
            hold = rnd.random() < 0.3
            q.enqueue(f"t{i}", f"s{rnd.randrange(6)}", held=hold)
            if hold:
                held.append(f"t{i}")
        elif op < 0.5 and held:
            q.unhold(held.pop(rnd.randrange(len(held))))
        elif op < 0.8:
            for g in q.grant(limit=2):
                assert g.turn_id not in held
                assert g.session_id not in running, f"two running in {g.session_id}"
                running[g.session_id] = g.turn_id
                assert len(running) <= 3
        elif running:
            s = rnd.choice(sorted(running))
            assert q.release(running.pop(s))
    for t in held:
        q.unhold(t)
    while q.queued() or q.running():
        for g in q.grant():
            running[g.session_id] = g.turn_id
        for s in list(running):
            q.release(running.pop(s))
    assert q.stats()["running"] == 0 and q.stats()["queued"] == 0


def test_worker_pool_ready_heartbeat_reap_and_new_incarnation() -> None:
    clock = Clock()
    pool = WorkerPool(heartbeat_interval_s=1.0, liveness=3, clock=clock)
    pool.ready("loop-1", 1, capacity=2)
    pool.ready("loop-2", 1)
    assert pool.free_slots() == 3
    w = pool.pick()
    assert w is not None
    pool.assign("loop-1", "t1")
    assert pool.owner_of("t1").name == "loop-1"  # type: ignore[union-attr]
    clock.t = 2.0
    assert pool.heartbeat("loop-2", 1) and not pool.heartbeat("loop-2", 7)
    clock.t = 3.5
    dead = pool.reap()
    assert [(d.name, d.turns) for d in dead] == [("loop-1", ("t1",))]
    pool.assign("loop-2", "t2")
    replaced = pool.ready("loop-2", 2)
    assert replaced is not None and replaced.turns == ("t2",)
    assert pool.died("loop-2", 1) is None  # an old incarnation's death report changes nothing
    assert pool.died("loop-2", 2) is not None
