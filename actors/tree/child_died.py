"""Tells store and lanes "child X incarnation N died", retrying each target until it acknowledges."""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Sequence

from geode.protocol import runtime
from geode.protocol.errors import GeodeError, NotReady, Overloaded, RequestTimeout, Unavailable
from geode.protocol.transport import Transport

log = logging.getLogger(__name__)
RETRYABLE = (RequestTimeout, Unavailable, Overloaded, NotReady)
DEFAULT_TARGETS = ("store", "lanes")


class ChildDiedNotifier:
    """One sender thread per target so an unreachable target never delays the others."""

    def __init__(
        self,
        transport: Transport,
        targets: Sequence[str] = DEFAULT_TARGETS,
        *,
        timeout_s: float = 1.0,
        max_backoff_s: float = 0.25,  # small steps: a restarted target serves within a second
    ) -> None:
        self._transport = transport
        self._timeout = timeout_s
        self._max_backoff = max_backoff_s
        self._stop = threading.Event()
        self._queues: dict[str, queue.SimpleQueue[runtime.ChildDied]] = {}
        self._threads: list[threading.Thread] = []
        for t in targets:
            q: queue.SimpleQueue[runtime.ChildDied] = queue.SimpleQueue()
            self._queues[t] = q
            th = threading.Thread(target=self._send_loop, args=(t, q), name=f"child-died-{t}", daemon=True)
            th.start()
            self._threads.append(th)
        self.acked: list[tuple[str, runtime.ChildDied]] = []

    def notify(self, name: str, incarnation: int, reason: str) -> None:
        """The supervisor's ``on_child_died`` hook: enqueue only (never blocks)."""
        msg = runtime.ChildDied(name=name, incarnation=incarnation, reason=reason[:512])
        for target, q in self._queues.items():
            if target != name:  # a restarted target recovers on its own start-up
                q.put(msg)

    def stop(self) -> None:
        self._stop.set()
        for q in self._queues.values():
            q.put(runtime.ChildDied(name="", incarnation=0))  # wake the sender
        for th in self._threads:
            th.join(timeout=0.2)

    def _send_loop(self, target: str, q: queue.SimpleQueue[runtime.ChildDied]) -> None:
        while not self._stop.is_set():
            msg = q.get()
            backoff = 0.05
            while not self._stop.is_set() and msg.name:
                try:
                    self._transport.call(target, runtime.CHILD_DIED, msg, timeout_s=self._timeout)
                    self.acked.append((target, msg))
                    break
                except RETRYABLE as exc:
                    log.info("child_died %s#%d → %s: %s; retrying", msg.name, msg.incarnation, target, exc)
                    self._stop.wait(backoff)
                    backoff = min(self._max_backoff, backoff * 2)
                except GeodeError as exc:
                    log.warning("child_died %s#%d refused by %s: %s", msg.name, msg.incarnation, target, exc)
                    break
