"""A loop worker's retirement for a drain-and-swap: it takes no new turn, finishes those it runs, then exits.

`geode serve` forks the loop workers before the zygote has imported the provider SDKs (ready at once); once
it has, the supervisor asks each such worker to retire (``lifecycle.CHILD_RETIRE``, ``actors/tree/swaps.py``)
and forks its replacement, which shares the SDK's pages, when it exits. Here, on that request: lanes is told
this incarnation's capacity is 0 (``worker.ready``; lanes pushes it nothing new once it has answered), the
turns it runs finish (a push already on its way is accepted and run: nothing is refused while work may still
arrive), and only when it has been idle since that answer does it close (a push after that is refused and
never started: lanes re-queues it when the supervisor reports this exit) and exit 0 by SIGTERM, child_main's
clean stop. Nothing is cut: the supervisor counts the exit as a swap, not a crash.

Until then an early worker offers lanes capacity 0 (:func:`early_hold_s`): a turn that comes before the swap
waits in its lane for the replacement, which has the SDK, instead of importing it here beside the zygote's
own import (on 2 cores that made the first answer seconds later). Only when no swap is asked for within the
hold (the zygote's import failed or hangs) does the worker offer its capacity and import the SDK for a turn.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
from collections.abc import Callable, Mapping

from geode.loop.membership import PoolMembership
from geode.protocol import turns
from geode.protocol.errors import GeodeError
from geode.protocol.transport import Transport

log = logging.getLogger("actors.loop_worker")
LANES = "lanes"
SETTLE_S = 0.1  # idle this long after lanes' answer: a push sent just before it has arrived (same host)
POLL_S = 0.05
EARLY_ENV = "GEODE_EARLY_FORK"  # "1": forked before the zygote had the SDKs (actors/tree/zygote.py)
HOLD_ENV = "GEODE_EARLY_HOLD_S"  # how long an early worker waits for its swap before it takes turns itself
HOLD_S = 30.0


def early_hold_s(environ: Mapping[str, str] = os.environ) -> float:
    """Seconds this worker offers capacity 0 while it waits for its swap; 0: not an early fork, or no hold."""
    if environ.get(EARLY_ENV) != "1":
        return 0.0
    try:
        return max(0.0, float(environ.get(HOLD_ENV, HOLD_S)))
    except ValueError:
        return HOLD_S


class Retirement:
    """One thread, started by the first :meth:`request`; :meth:`admit` is the worker's gate for a new turn."""

    def __init__(
        self,
        membership: PoolMembership,
        *,
        lock: threading.Lock,
        running: Callable[[], int],
        settle_s: float = SETTLE_S,
        terminate: Callable[[], None] | None = None,
    ) -> None:
        self.transport: Transport = membership.transport
        self._membership = membership
        self.ready = membership.ready.model_copy(update={"capacity": 0})
        self.lock = lock  # the worker's: held by admit (and the worker's accept) and by the close check
        self.running = running  # turns running now (called under ``lock``)
        self.stopped = membership.stopped  # the worker is stopping anyway
        self.on_close = membership.stop  # stop heartbeating (before the exit)
        self.settle_s = settle_s
        self.terminate = terminate or _sigterm_self  # child_main's clean stop: exit 0
        self.admitted = 0  # turns admitted so far (under ``lock``)
        self.closed = False
        self._thread: threading.Thread | None = None
        self._asked = threading.Event()
        self._announcing = threading.Lock()  # the hold's capacity and the retirement's 0 reach lanes in order

    def hold(self, capacity: int, hold_s: float) -> None:
        """An early worker (capacity 0 at ready) offers ``capacity`` if not asked to retire in ``hold_s``."""
        threading.Thread(
            target=self._hold, args=(capacity, hold_s), name=f"{self.ready.worker}-hold", daemon=True
        ).start()

    def _hold(self, capacity: int, hold_s: float) -> None:
        if self._asked.wait(hold_s) or self.stopped.is_set():
            return
        log.warning(
            "%s#%d: no swap within %.0f s (the zygote has no SDKs): taking turns (a turn imports the SDK)",
            self.ready.worker,
            self.ready.incarnation,
            hold_s,
        )
        offer = self.ready.model_copy(update={"capacity": capacity})
        while not self.stopped.is_set():
            with self._announcing:
                if self._asked.is_set():
                    return
                try:
                    self.transport.call(LANES, turns.WORKER_READY, offer, timeout_s=2.0)
                except GeodeError as exc:
                    log.info("%s: offering capacity: lanes not reachable: %s", self.ready.worker, exc)
                else:
                    self.membership_ready(offer)
                    return
            self.stopped.wait(0.2)

    def membership_ready(self, ready: turns.WorkerReady) -> None:
        """What lanes acknowledged is what the heartbeats' ``free`` counts from."""
        self._membership.ready = ready

    def request(self) -> None:
        """The supervisor asked (repeated while it waits): begin once."""
        self._asked.set()
        if self._thread is None:
            log.info(
                "%s#%d: asked to retire (a fork with the SDKs replaces it)",
                self.ready.worker,
                self.ready.incarnation,
            )
            self._thread = threading.Thread(target=self._run, name=f"{self.ready.worker}-retire", daemon=True)
            self._thread.start()

    def admit(self) -> bool:
        """Under the worker's lock, before a new turn starts: False once closed (never started here)."""
        if self.closed:
            return False
        self.admitted += 1
        return True

    def _run(self) -> None:
        while not self.stopped.is_set():
            with self.lock:
                seen = self.admitted
            if not self._announce():
                continue
            while self._busy() and not self.stopped.wait(POLL_S):
                pass
            if self.stopped.wait(self.settle_s):
                return
            with self.lock:  # idle since lanes' answer and nothing admitted meanwhile: close
                if self.admitted == seen and not self.running():
                    self.closed = True
            if self.closed:
                self._exit()
                return

    def _busy(self) -> bool:
        with self.lock:
            return self.running() > 0

    def _announce(self) -> bool:
        """Capacity 0 at lanes (acknowledged: from then on lanes pushes nothing new here)."""
        try:
            with self._announcing:
                self.transport.call(LANES, turns.WORKER_READY, self.ready, timeout_s=2.0)
            self.membership_ready(self.ready)
            return True
        except GeodeError as exc:
            log.info("%s: retiring: lanes not reachable: %s", self.ready.worker, exc)
            self.stopped.wait(0.2)
            return False

    def _exit(self) -> None:
        log.info(
            "%s#%d: idle and retired: exiting for its replacement", self.ready.worker, self.ready.incarnation
        )
        self.on_close()
        self.terminate()


def _sigterm_self() -> None:
    os.kill(os.getpid(), signal.SIGTERM)
