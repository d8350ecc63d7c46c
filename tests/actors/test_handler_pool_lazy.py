"""HandlerPool starts its threads when jobs need them, never making a job wait while fewer than size run."""

from __future__ import annotations

import threading

from actors.bus.handler_pool import HandlerPool


def test_one_thread_until_jobs_overlap() -> None:
    pool = HandlerPool(32, "lazy-test")
    try:
        assert len(pool._threads) == 1
        done = [threading.Event() for _ in range(20)]
        for ev in done:  # one after the other: the one thread serves them all
            pool.submit(ev.set)
            assert ev.wait(5)
        assert len(pool._threads) == 1
    finally:
        pool.stop()


def test_blocked_jobs_each_get_a_thread_up_to_size() -> None:
    pool = HandlerPool(8, "lazy-test")
    release = threading.Event()
    started = threading.Semaphore(0)

    def slow() -> None:
        started.release()
        release.wait(10)

    try:
        for _ in range(8):  # 8 slow jobs at once: each runs at once on a thread of its own
            pool.submit(slow)
        for _ in range(8):
            assert started.acquire(timeout=5)
        assert len(pool._threads) == 8
        ran = threading.Event()
        pool.submit(ran.set)  # the 9th waits for a free thread: no thread beyond size
        assert not ran.wait(0.2)
        assert len(pool._threads) == 8
        release.set()
        assert ran.wait(5)
        assert len(pool._threads) == 8
    finally:
        release.set()
        pool.stop()


def test_a_failing_job_frees_its_thread() -> None:
    pool = HandlerPool(4, "lazy-test")

    def boom() -> None:
        raise RuntimeError("handler bug")

    try:
        for _ in range(10):
            pool.submit(boom)
        ok = threading.Event()
        pool.submit(ok.set)
        assert ok.wait(5)
        assert len(pool._threads) <= 4
    finally:
        pool.stop()


def test_stop_ends_every_started_thread_and_starts_no_more() -> None:
    pool = HandlerPool(4, "lazy-test")
    release = threading.Event()

    def slow() -> None:
        release.wait(10)

    for _ in range(3):
        pool.submit(slow)
    release.set()
    pool.stop()
    for t in list(pool._threads):
        t.join(5)
        assert not t.is_alive()
    pool.submit(lambda: None)  # after stop: queued, no new thread
    assert len(pool._threads) == 3


def test_a_flushed_burst_gets_a_thread_each_up_to_size_as_submits_would() -> None:
    """The bus thread's burst gathered in ``pending`` and queued by one ``flush``: every blocked job runs at
    once on a thread of its own up to size, the rest wait; ``full`` counts the gathered jobs."""
    pool = HandlerPool(6, "lazy-test", max_backlog=10)
    release = threading.Event()
    started = threading.Semaphore(0)

    def slow() -> None:
        started.release()
        release.wait(10)

    try:
        pool.pending.extend([slow] * 9)
        assert not pool.full()
        pool.pending.append(slow)
        assert pool.full()  # 10 gathered, none queued yet
        pool.flush()
        assert pool.pending == []
        for _ in range(6):
            assert started.acquire(timeout=5)
        assert not started.acquire(timeout=0.2)  # 4 wait for a free thread: none beyond size
        assert len(pool._threads) == 6
        release.set()
        for _ in range(4):
            assert started.acquire(timeout=5)
        assert len(pool._threads) == 6
    finally:
        release.set()
        pool.stop()
