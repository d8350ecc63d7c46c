"""A loop worker's membership of lanes' pool: ``worker.ready``, then heartbeats naming the turns it runs; on a
worker host each heartbeat is a call whose answer is how it hears main (silent or refused: exit for a new
incarnation, which registers afresh)."""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from collections.abc import Callable

from geode.lanes.pool import LIVENESS
from geode.protocol import turns
from geode.protocol.errors import GeodeError
from geode.protocol.transport import Transport

log = logging.getLogger("actors.loop_worker")
LANES = "lanes"


class PoolMembership:
    """One thread. ``stopped`` ends it; ``beat_now`` (lanes reconnected) heartbeats at once, not at the next
    interval, so a restarted lanes learns at once which turns run here."""

    def __init__(
        self,
        transport: Transport,
        ready: turns.WorkerReady,
        *,
        heartbeat_s: float,
        remote: bool,
        running: Callable[[], list[str]],
        on_ready: Callable[[], None],
        on_beat: Callable[[], object],
        on_executor_changed: Callable[[], None],
    ) -> None:
        self.transport = transport
        self.ready = ready
        self.name = ready.worker
        self.heartbeat_s = heartbeat_s
        self.remote = remote  # on a worker host: exit for a new incarnation when main stops answering
        self._running = running
        self._on_ready = on_ready  # after lanes acknowledged worker.ready
        self._on_beat = on_beat  # after each heartbeat sent
        self._on_executor_changed = on_executor_changed  # main's executor changed (remote workers only)
        self._last_heard = time.monotonic()
        self._catalogue_stamp = ""  # main's executor as lanes last told it (remote workers only)
        self.stopped = threading.Event()
        self.beat_now = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> PoolMembership:
        self._thread = threading.Thread(target=self._run, name=f"{self.name}-heartbeat", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self.stopped.set()
        self.beat_now.set()

    def _run(self) -> None:
        announced = False
        while not self.stopped.is_set():
            try:
                if not announced:
                    self.transport.call(LANES, turns.WORKER_READY, self.ready, timeout_s=2.0)
                    announced = True
                    self._on_ready()
                else:
                    running = self._running()
                    hb = turns.WorkerHeartbeat(
                        worker=self.name,
                        incarnation=self.ready.incarnation,
                        running=running,
                        free=max(0, self.ready.capacity - len(running)),
                    )
                    if self.remote:
                        self._remote_heartbeat(hb)
                    else:
                        self.transport.cast(LANES, turns.WORKER_HEARTBEAT, hb)
                    self._on_beat()
                self._last_heard = time.monotonic()
            except GeodeError as exc:
                log.info("%s: lanes not reachable yet: %s", self.name, exc)
                if announced and self.remote:
                    self._exit_if_unheard()
            # a restarted lanes learns at once which turns run here (and pushes an orphan again at once)
            self.beat_now.wait(self.heartbeat_s if announced else 0.2)
            self.beat_now.clear()

    def _remote_heartbeat(self, hb: turns.WorkerHeartbeat) -> None:
        """A worker host's heartbeat is a call: its answer is how this worker hears main. Refused (main
        declared this incarnation dead: it was silent too long, its turns re-queued): exit at once."""
        ack = self.transport.call(LANES, turns.WORKER_HEARTBEAT, hb, timeout_s=self.heartbeat_s)
        ok = ack.get("ok") if isinstance(ack, dict) else getattr(ack, "ok", True)
        if ok is False:
            self._exit_for_new_incarnation("main's lanes declared this incarnation dead")
        stamp = ack.get("catalogue") if isinstance(ack, dict) else getattr(ack, "catalogue", "")
        if stamp and stamp != self._catalogue_stamp:
            if self._catalogue_stamp:  # main's executor changed: its catalogue may have (MCP servers, trust)
                log.info("%s: main's executor changed; asking for its tool catalogue again", self.name)
                self._on_executor_changed()
            self._catalogue_stamp = stamp

    def _exit_if_unheard(self) -> None:
        silent = time.monotonic() - self._last_heard
        if silent > self.liveness_s:
            self._exit_for_new_incarnation(f"main has not answered for {silent:.1f}s")

    @property
    def liveness_s(self) -> float:
        """Shorter than lanes' expiry (``LIVENESS`` heartbeats): this side gives up before main could take
        a late heartbeat of it for a live worker."""
        return self.heartbeat_s * (LIVENESS - 0.5)

    def _exit_for_new_incarnation(self, why: str) -> None:
        """Stop this process (SIGTERM: child_main's clean exit); the host's supervisor starts a new
        incarnation, which registers with lanes afresh (a turn cut here was re-queued by main)."""
        log.warning("%s#%d: %s; exiting for a new incarnation", self.name, self.ready.incarnation, why)
        self.stopped.set()
        os.kill(os.getpid(), signal.SIGTERM)
