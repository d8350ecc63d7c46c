"""Daemon threads that wait for their next job instead of a new thread per model call or tool batch.

Each round of a turn runs its model call on a thread of its own (so a cancel ends the wait at once,
:mod:`geode.loop.call`) and its tool calls on up to ``tool_parallelism`` threads (:mod:`geode.loop.batch`);
starting those threads was a measurable share of the loop's CPU (issue 34), as were the two threads of each
turn of a loop worker (its actor's and its body's, actors/loop_worker.py). A thread here runs one job,
then waits up to ``IDLE_S`` for another before it ends. Daemon threads, as the model call's always was: a
call abandoned by a cancel never holds up the process's exit. A forked child starts with none (the
parent's idle threads do not exist in it).
"""

from __future__ import annotations

import contextvars
import logging
import os
import threading
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from queue import Empty, SimpleQueue
from typing import Any, TypeVar

log = logging.getLogger(__name__)
T = TypeVar("T")
IDLE_S = 30.0

Job = Callable[[], object]


class ReusedThreads:
    """``run(job)``: ``job()`` on an idle thread of this set, or on a new one when none is idle."""

    def __init__(self, name: str, idle_s: float = IDLE_S) -> None:
        self.name, self.idle_s = name, idle_s
        self._idle: list[SimpleQueue[Job]] = []
        self._lock = threading.Lock()
        self._pid = os.getpid()
        self.started = 0  # threads started (a work count for the tests)

    def run(self, job: Job) -> None:
        with self._lock:
            if self._pid != os.getpid():  # forked: the parent's threads are not here
                self._idle, self._pid = [], os.getpid()
            inbox = self._idle.pop() if self._idle else None
        if inbox is None:
            inbox = SimpleQueue()
            self.started += 1
            threading.Thread(target=self._serve, args=(inbox,), name=self.name, daemon=True).start()
        inbox.put(job)

    def run_fresh(self, job: Job, name: str) -> None:
        """``job()`` as if on a new thread called ``name``: in an empty :mod:`contextvars` context (nothing
        a previous job set leaks into it) and under that thread name while it runs (logs, py-spy)."""

        def fresh() -> None:
            me = threading.current_thread()
            me.name = name
            try:
                contextvars.Context().run(job)
            finally:
                me.name = self.name

        self.run(fresh)

    def idle(self) -> int:
        """How many threads of this set wait for a job now."""
        with self._lock:
            return len(self._idle) if self._pid == os.getpid() else 0

    def _serve(self, inbox: SimpleQueue[Job]) -> None:
        while True:
            try:
                job = inbox.get(timeout=self.idle_s)
            except Empty:
                with self._lock:
                    if inbox in self._idle:
                        self._idle.remove(inbox)
                        return
                continue  # handed a job as the wait ended: it is in the inbox
            try:
                job()
            except BaseException:  # a job reports its own outcome; this only keeps the thread alive
                log.exception("%s: a job raised", self.name)
            with self._lock:
                self._idle.append(inbox)

    def map_ordered(self, fn: Callable[..., T], jobs: list[tuple[Any, ...]], width: int) -> list[Future[T]]:
        """``fn(*args)`` for each ``args`` of ``jobs``, started in order on at most ``width`` threads at once
        (as a ``ThreadPoolExecutor(width)`` would); one future per job, in the jobs' order."""
        futures: list[Future[T]] = [Future() for _ in jobs]
        todo = deque(zip(futures, jobs, strict=True))
        lock = threading.Lock()

        def drain() -> None:
            while True:
                with lock:
                    if not todo:
                        return
                    future, args = todo.popleft()
                if not future.set_running_or_notify_cancel():
                    continue
                try:
                    future.set_result(fn(*args))
                except BaseException as exc:
                    future.set_exception(exc)

        for _ in range(max(1, min(width, len(jobs)))):
            self.run(drain)
        return futures


MODEL_CALLS = ReusedThreads("model-call")
TOOL_CALLS = ReusedThreads("loop-tool")
TURNS = ReusedThreads("loop-turn")  # a loop worker's turn: its pykka actor's loop, and the turn's body
