"""A small pool of pykka actors that run handlers off the bus thread, so one slow handler blocks no other."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

import pykka

log = logging.getLogger(__name__)

Job = Callable[[], None]


class _HandlerActor(pykka.ThreadingActor):
    use_daemon_thread = True

    def __init__(self, pool: HandlerPool, index: int) -> None:
        super().__init__()
        self._pool = pool
        self._index = index

    def on_receive(self, message: object) -> None:
        try:
            if callable(message):
                message()
        except Exception:  # a handler bug must not kill the actor
            log.exception("handler job failed")
        finally:
            self._pool._done(self._index)


class HandlerPool:
    """``size`` pykka actors; :meth:`submit` tells the least-busy one to run a job."""

    def __init__(self, size: int = 4, name: str = "handlers") -> None:
        self.name = name
        self._lock = threading.Lock()
        self._busy = [0] * max(1, size)
        self._refs = [_HandlerActor.start(self, i) for i in range(len(self._busy))]

    def submit(self, job: Job) -> None:
        with self._lock:
            i = min(range(len(self._busy)), key=self._busy.__getitem__)
            self._busy[i] += 1
        try:
            self._refs[i].tell(job)
        except pykka.ActorDeadError:
            self._done(i)
            log.warning("%s: handler actor %d is stopped; job dropped", self.name, i)

    def _done(self, i: int) -> None:
        with self._lock:
            self._busy[i] -= 1

    def stop(self) -> None:
        for ref in self._refs:
            try:
                ref.stop(block=False)
            except pykka.ActorDeadError:
                pass
