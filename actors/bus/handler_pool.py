"""A pool of handler threads fed by one shared queue, so one slow handler never holds up the others.

Plain threads, not actors: a handler that needs one-message-at-a-time state posts to its service's pykka
actor (``actors/lanes.py``). (A pool of pykka actors with least-busy routing, measured earlier, gave the
same isolation for slow handlers, but a shared queue never parks a message behind a busy worker.)
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable

from geode.work_tally import HANDOFF_POOL
from geode.work_tally import ON as TALLY_ON
from geode.work_tally import handoff as tally

log = logging.getLogger(__name__)

Job = Callable[[], None]
_STOP = object()
_current = threading.local()  # .pool: the HandlerPool whose job this thread runs


def busy_elsewhere() -> bool:
    """True on a handler thread whose pool has another job than this thread's running or waiting (its reply
    may be left to the bus thread: ``actors.bus.reply_outbox``); False on any other thread."""
    pool: HandlerPool | None = getattr(_current, "pool", None)
    return pool is not None and (len(pool._threads) - pool._idle > 1 or not pool._q.empty())


class HandlerPool:
    """Up to ``size`` daemon threads; :meth:`submit` queues a job for the first free one.

    Threads start when needed: one at first, another when a job comes while every started thread is busy
    (so a job never waits behind a busy thread while fewer than ``size`` run). An idle thread costs its child
    ~18 KiB of private pages (stack, thread state, the first writes to pages shared with the zygote), and the
    store, lanes and executor pools (64 + 32 + 32) are idle at rest."""

    def __init__(self, size: int = 4, name: str = "handlers", max_backlog: int = 10_000) -> None:
        self.name = name
        self.max_backlog = max_backlog
        self._q: queue.SimpleQueue[object] = queue.SimpleQueue()
        self._size = max(1, size)
        self._lock = threading.Lock()
        self._idle = 0
        self._threads: list[threading.Thread] = []
        self.pending: list[Job] = []  # jobs the bus thread read this pass, queued together by flush()
        self._grow()

    def _grow(self) -> None:
        t = threading.Thread(target=self._work, name=f"{self.name}-{len(self._threads)}", daemon=True)
        self._threads.append(t)
        self._idle += 1
        t.start()

    def submit(self, job: Job) -> None:
        if TALLY_ON:  # (a call to a no-op otherwise, on every hand-off)
            tally(HANDOFF_POOL)
        with self._lock:
            if self._idle > 0:
                self._idle -= 1
            elif len(self._threads) < self._size:
                self._grow()
                self._idle -= 1
        self._q.put(job)

    def flush(self) -> None:
        """Queue the jobs gathered in :attr:`pending` (by the bus thread, which calls this right before it
        sleeps) as that many :meth:`submit` calls would, with one call, one lock and one count of the idle
        threads for them all: a burst of requests costs one hand-off call, not one each."""
        jobs, self.pending = self.pending, []
        if TALLY_ON:
            for _ in jobs:
                tally(HANDOFF_POOL)
        with self._lock:
            n = len(jobs)
            take = n if n <= self._idle else self._idle
            self._idle -= take
            n -= take
            while n > 0 and len(self._threads) < self._size:
                self._grow()
                self._idle -= 1
                n -= 1
        put = self._q.put
        for job in jobs:
            put(job)

    def full(self) -> bool:
        """True when ``max_backlog`` jobs are already waiting for a free worker (reply ``overloaded``)."""
        return self._q.qsize() + len(self.pending) >= self.max_backlog

    def _work(self) -> None:
        _current.pool = self
        while True:
            job = self._q.get()
            if job is _STOP:
                return
            try:
                job()  # type: ignore[operator]
            except Exception:  # a handler bug must not kill the worker
                log.exception("%s: handler job failed", self.name)
            with self._lock:
                self._idle += 1

    def stop(self) -> None:
        with self._lock:  # no thread started after this (a job submitted later waits in the queue, as before)
            self._size = 0
            threads = len(self._threads)
        for _ in range(threads):
            self._q.put(_STOP)
