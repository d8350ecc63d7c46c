"""A loop worker's retirement for a drain-and-swap (geode/loop/retirement.py): lanes hears capacity 0 first,
the turns it runs (and a push already on its way) finish, only then does it close and exit; a push after
that is refused, never started."""

from __future__ import annotations

import threading
from typing import Any

from geode.loop.membership import PoolMembership
from geode.loop.retirement import EARLY_ENV, HOLD_ENV, HOLD_S, Retirement, early_hold_s
from geode.protocol import turns
from tests.waiting import poll_for


class Lanes:
    """The worker's transport towards lanes: records each ``worker.ready`` and runs ``on_call`` in it."""

    def __init__(self) -> None:
        self.ready: list[turns.WorkerReady] = []
        self.on_call = lambda: None

    def call(self, target: str, message: Any, body: Any, **kw: Any) -> dict[str, Any]:
        assert target == "lanes" and message is turns.WORKER_READY
        self.ready.append(body)
        self.on_call()
        return {}


def _retirement(lanes: Lanes, running: list[str]) -> tuple[Retirement, threading.Event, threading.Lock]:
    lock, exited = threading.Lock(), threading.Event()
    ready = turns.WorkerReady(worker="loop-1", incarnation=1, capacity=2)
    membership = PoolMembership(
        lanes,  # type: ignore[arg-type]
        ready,
        heartbeat_s=1.0,
        remote=False,
        running=list,
        on_ready=lambda: None,
        on_beat=lambda: None,
        on_executor_changed=lambda: None,
    )  # not started: the retirement only uses its transport, its READY, ``stopped`` and ``stop``
    r = Retirement(membership, lock=lock, running=lambda: len(running), settle_s=0.02, terminate=exited.set)
    return r, exited, lock


def test_a_retiring_worker_finishes_its_turn_before_it_exits_and_then_refuses_a_push() -> None:
    lanes, running = Lanes(), ["t1"]
    r, exited, lock = _retirement(lanes, running)
    r.request()
    r.request()  # repeated by the supervisor: one retirement
    poll_for(lambda: lanes.ready, 10, what="capacity 0 told to lanes")
    assert lanes.ready[0].capacity == 0 and lanes.ready[0].incarnation == 1
    assert not exited.wait(0.2) and not r.closed  # the turn still runs: nothing is cut
    with lock:
        running.clear()  # the turn ended (turn.done acknowledged)
    assert exited.wait(10)
    with lock:
        assert r.closed and not r.admit()  # a late push is refused: never started here


def test_a_push_that_arrives_after_the_announcement_runs_before_the_worker_closes() -> None:
    lanes, running = Lanes(), list[str]()
    r, exited, lock = _retirement(lanes, running)

    def push_in_flight() -> None:  # lanes pushed a turn just before it handled capacity 0
        lanes.on_call = lambda: None
        with lock:
            assert r.admit()
            running.append("late")

    lanes.on_call = push_in_flight
    r.request()
    poll_for(lambda: running, 10, what="the late push admitted")
    assert not exited.wait(0.2) and not r.closed
    with lock:
        running.clear()
    assert exited.wait(10)
    assert len(lanes.ready) >= 2  # told again after the late turn: lanes may have restarted meanwhile


def test_an_early_worker_offers_its_capacity_only_when_no_swap_comes_within_the_hold() -> None:
    lanes, running = Lanes(), list[str]()
    r, _exited, _ = _retirement(lanes, running)
    r.hold(2, 0.05)  # the zygote never got the SDKs: after the hold the worker takes turns itself
    poll_for(lambda: lanes.ready, 10, what="the capacity offered after the hold")
    assert [b.capacity for b in lanes.ready] == [2]
    assert r._membership.ready.capacity == 2  # the heartbeats' free counts from it


def test_a_swap_asked_within_the_hold_never_offers_capacity() -> None:
    lanes, running = Lanes(), list[str]()
    r, exited, _ = _retirement(lanes, running)
    r.hold(2, 0.3)
    r.request()  # the zygote has the SDKs: retire (capacity 0), never offer 2
    assert exited.wait(10)
    assert lanes.ready and all(b.capacity == 0 for b in lanes.ready)


def test_only_an_early_fork_holds_its_capacity() -> None:
    assert early_hold_s({}) == 0.0  # a replacement, a restart from a warm zygote, a worker host's fork
    assert early_hold_s({EARLY_ENV: "1"}) == HOLD_S
    assert early_hold_s({EARLY_ENV: "1", HOLD_ENV: "0"}) == 0.0  # tests: take turns at once
    assert early_hold_s({EARLY_ENV: "1", HOLD_ENV: "x"}) == HOLD_S
