"""The lanes child's :class:`~geode.lanes.records.StoreRunner`: store calls on a few ``lanes-store`` threads,
or continued by a callback, in issue order per key.

The lanes actor never waits for the store: each call runs here and its continuation is posted back to the
actor (``deliver``) before the key's next call starts, so one session's slow write never holds up another.
A call that can complete by callback (:meth:`KeyedRunner.start`: the store client sends it and the bus thread
hands over the reply) needs no thread at all: it is sent on the thread that starts it (the actor's, or the one
that delivered the key's previous outcome) and no pool thread is woken to send it and wait (issue 34).
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from geode.lanes.records import Outcome, Then
from geode.work_tally import HANDOFF_POOL
from geode.work_tally import handoff as tally

log = logging.getLogger("actors.lanes")
STORE_THREADS = 4

Begin = Callable[[Then], None]  # starts a round trip; calls its argument once with the outcome, on any thread
_Entry = tuple[bool, Callable[..., Any], Then]  # (continued?, the call or its begin, the continuation)


class KeyedRunner:
    """Runs store calls on a small pool; calls with the same key run one after another, in issue order.

    ``deliver(then, outcome)`` posts each continuation to the actor before the key's next call starts.
    """

    def __init__(self, threads: int = STORE_THREADS) -> None:
        self._pool = ThreadPoolExecutor(max(1, threads), thread_name_prefix="lanes-store")
        self._mu = threading.Lock()  # guards the queues only, never held across a call
        self._queues: dict[str, deque[_Entry]] = {}
        self.deliver: Callable[[Then, Outcome], None] = lambda then, out: then(out)
        self.submits = 0  # jobs queued for a pool thread (a count: tests and status)

    def __call__(self, key: str, call: Callable[[], Any], then: Then) -> None:
        self._enter(key, (False, call, then))

    def start(self, key: str, begin: Begin, then: Then) -> None:
        """As a call, but ``begin(done)`` starts the round trip and ``done(outcome)`` ends it: no thread
        waits for it (``begin`` must not block; ``done`` may run on any thread, once)."""
        self._enter(key, (True, begin, then))

    def offload(self, job: Callable[[], None]) -> None:
        """Run ``job`` on a pool thread (a continued call's blocking retry)."""
        self.submits += 1
        tally(HANDOFF_POOL)
        self._pool.submit(job)

    def _enter(self, key: str, entry: _Entry) -> None:
        with self._mu:
            waiting = self._queues.get(key)
            if waiting is not None:
                waiting.append(entry)
                return
            self._queues[key] = deque()
        self._dispatch(key, entry)

    def _dispatch(self, key: str, entry: _Entry) -> None:
        continued, fn, then = entry
        if continued:
            ended = [False]

            def done(out: Outcome) -> None:
                if not ended[0]:  # once, whoever ends it
                    ended[0] = True
                    self._finish(key, then, out)

            try:
                fn(done)
            except Exception as exc:  # refused before it was sent (the bus stopped): its outcome now
                done(exc)
            return
        try:
            self.submits += 1
            tally(HANDOFF_POOL)  # a job queued for a lanes-store thread (counted as the bus's pool jobs)
            self._pool.submit(self._run, key, fn, then)
        except RuntimeError:  # shut down: the actor is stopping
            log.debug("lanes store runner stopped; dropping a %s call", key)

    def _run(self, key: str, call: Callable[[], Any], then: Then) -> None:
        try:
            out: Outcome = call()
        except Exception as exc:
            out = exc
        self._finish(key, then, out)

    def _finish(self, key: str, then: Then, out: Outcome) -> None:
        self.deliver(then, out)
        with self._mu:
            waiting = self._queues[key]
            if not waiting:
                del self._queues[key]
                return
            entry = waiting.popleft()
        self._dispatch(key, entry)

    def stop(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
