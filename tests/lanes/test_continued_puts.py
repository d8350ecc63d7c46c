"""A turn record's put continued by callback (issue 34): no ``lanes-store`` pool thread is woken per put, the
per-turn order of store calls holds, and a turn's records are the same."""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from geode.lanes.keyed_runner import KeyedRunner
from geode.lanes.records import MemoryTurnStore
from geode.protocol.errors import Unavailable
from geode.records.models import TurnRecord, TurnState
from tests.lanes.harness import done, make, submit


class ContinuedStore(MemoryTurnStore):
    """``put_turn_then`` completed on another thread (as the bus thread hands a reply over)."""

    def __init__(self) -> None:
        super().__init__()
        self.continued = 0
        self.jobs: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()
        self.thread = threading.Thread(target=self._run, name="fake-bus", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while (job := self.jobs.get()) is not None:
            job()

    def put_turn_then(self, turn: TurnRecord, then: Callable[[Any], None]) -> None:
        self.continued += 1

        def reply() -> None:
            try:
                out: Any = self.put_turn(turn)
            except Exception as exc:
                out = exc
            then(out)

        self.jobs.put(reply)


def test_a_turns_puts_are_continued_and_wake_no_pool_thread() -> None:
    store = ContinuedStore()
    svc, _tr, _ = make(store)
    try:
        svc.worker_ready("loop-1", 1)
        assert submit(svc, "t1", "s1").state == "running"
        done(svc, "t1", "s1", worker="loop-1")
        assert store.get_turn("t1").state == TurnState.DONE  # type: ignore[union-attr]
        assert store.continued == store.writes == 2  # running, done: both continued
        assert svc.lanes.runner.submits == 0  # was 2 a turn: a pool thread woken to send and wait
    finally:
        svc.stop()
        store.jobs.put(None)


def test_a_failed_continued_put_is_the_turns_store_error_as_before() -> None:
    store = ContinuedStore()
    svc, _tr, _ = make(store)
    try:
        svc.worker_ready("loop-1", 1)
        store.fail = True
        with pytest.raises(Unavailable, match="turn store unavailable"):  # the store's error, as before
            submit(svc, "t1", "s1")
        store.fail = False
        assert submit(svc, "t2", "s1").state == "running"
    finally:
        svc.stop()
        store.jobs.put(None)


def test_calls_of_one_key_run_in_order_continued_or_not() -> None:
    runner = KeyedRunner(2)
    log: list[str] = []
    delivered = threading.Event()
    completers: list[Callable[[Any], None]] = []
    runner.deliver = lambda then, out: then(out)

    def begin(name: str) -> Callable[[Callable[[Any], None]], None]:
        def start(end: Callable[[Any], None]) -> None:
            log.append(f"start {name}")
            completers.append(end)

        return start

    runner.start("k", begin("a"), lambda out: log.append(f"then a {out}"))
    runner("k", lambda: log.append("run b") or "b", lambda out: log.append(f"then b {out}"))
    runner.start("k", begin("c"), lambda out: (log.append(f"then c {out}"), delivered.set()))
    runner.start("other", begin("x"), lambda out: log.append(f"then x {out}"))
    assert log == ["start a", "start x"]  # b and c wait for a; another key does not
    completers[0]("A")
    end = time.monotonic() + 5
    while len(completers) < 3 and time.monotonic() < end:  # b ran on the pool, then c started
        time.sleep(0.01)
    completers[2]("C")
    completers[2]("again")  # a second end of one call is ignored
    assert delivered.wait(5)
    assert log == ["start a", "start x", "then a A", "run b", "then b b", "start c", "then c C"]
    assert runner.submits == 1  # only the blocking call went to a pool thread
    runner.stop()
