"""A remote executor's link to main's executor: ``executor.ready``, then a heartbeat a second; when main stops
answering for the liveness window it calls ``on_lost`` (the child exits; its supervisor starts a new
incarnation, which registers afresh)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from geode.protocol import tools as m
from geode.protocol.errors import GeodeError
from geode.protocol.transport import Transport
from geode.tools.placement import HEARTBEAT_S, LIVENESS_S

log = logging.getLogger(__name__)


class RemoteAgent:
    """One thread. ``registered`` is set once main acknowledged the ready (tests and status wait on it)."""

    def __init__(
        self,
        transport: Transport,
        ready: m.ExecutorReady,
        on_lost: Callable[[str], None],
        *,
        target: str = "executor",
        heartbeat_s: float = HEARTBEAT_S,
        liveness_s: float = LIVENESS_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.transport = transport
        self.ready = ready
        self.on_lost = on_lost
        self.target = target
        self.heartbeat_s = heartbeat_s
        self.liveness_s = liveness_s
        self._clock = clock
        self.registered = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> RemoteAgent:
        self._thread = threading.Thread(target=self._run, name="executor-heartbeat", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=self.heartbeat_s + 1.0)

    def _run(self) -> None:
        last_ok = self._clock()
        ident = f"{self.ready.host}/{self.ready.name}#{self.ready.incarnation}"
        r = self.ready
        hb = m.ExecutorHeartbeat(host=r.host, name=r.name, incarnation=r.incarnation)
        wait = 0.0
        while not self._stop.wait(wait):
            wait = self.heartbeat_s
            kind, body = (
                (m.EXECUTOR_HEARTBEAT, hb) if self.registered.is_set() else (m.EXECUTOR_READY, self.ready)
            )
            try:
                reply = self.transport.call(self.target, kind, body, timeout_s=self.heartbeat_s)
            except GeodeError as exc:
                log.info("%s to %s: %s", kind, self.target, exc)
            else:
                last_ok = self._clock()
                if not m.ExecutorKnown.model_validate(reply).known:
                    # refused, or main declared this incarnation lost (or forgot it): never carry on under
                    # the same owner, whose admitted receipts may already be uncertain
                    self._leave(f"{self.target} does not accept {ident} ({kind})")
                    return
                if not self.registered.is_set():
                    log.info("registered with %s as %s (roots %s)", self.target, ident, self.ready.roots)
                    self.registered.set()
            silent = self._clock() - last_ok
            if silent > self.liveness_s:
                self._leave(f"no answer from {self.target} for {silent:.1f}s")
                return

    def _leave(self, why: str) -> None:
        log.error("%s: leaving so that a new incarnation registers", why)
        self.on_lost(why)
