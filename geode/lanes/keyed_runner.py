"""The lanes child's :class:`~geode.lanes.records.StoreRunner`: store calls on a few ``lanes-store`` threads,
in issue order per key.

The lanes actor never waits for the store: each call runs here and its continuation is posted back to the
actor (``deliver``) before the key's next call starts, so one session's slow write never holds up another.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from geode.lanes.records import Outcome, Then

log = logging.getLogger("actors.lanes")
STORE_THREADS = 4


class KeyedRunner:
    """Runs store calls on a small pool; calls with the same key run one after another, in issue order.

    ``deliver(then, outcome)`` posts each continuation to the actor before the key's next call starts.
    """

    def __init__(self, threads: int = STORE_THREADS) -> None:
        self._pool = ThreadPoolExecutor(max(1, threads), thread_name_prefix="lanes-store")
        self._mu = threading.Lock()  # guards the queues only, never held across a call
        self._queues: dict[str, deque[tuple[Callable[[], Any], Then]]] = {}
        self.deliver: Callable[[Then, Outcome], None] = lambda then, out: then(out)

    def __call__(self, key: str, call: Callable[[], Any], then: Then) -> None:
        with self._mu:
            waiting = self._queues.get(key)
            if waiting is not None:
                waiting.append((call, then))
                return
            self._queues[key] = deque()
        self._submit(key, call, then)

    def _submit(self, key: str, call: Callable[[], Any], then: Then) -> None:
        try:
            self._pool.submit(self._run, key, call, then)
        except RuntimeError:  # shut down: the actor is stopping
            log.debug("lanes store runner stopped; dropping a %s call", key)

    def _run(self, key: str, call: Callable[[], Any], then: Then) -> None:
        try:
            out: Outcome = call()
        except Exception as exc:
            out = exc
        self.deliver(then, out)
        with self._mu:
            waiting = self._queues[key]
            if not waiting:
                del self._queues[key]
                return
            call, then = waiting.popleft()
        self._submit(key, call, then)

    def stop(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
