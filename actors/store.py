"""The ``store`` child: the only writer of the LMDB record store, served at bus endpoint ``store``.

Run as ``python -m actors.store`` (the supervisor sets GEODE_HOME, GEODE_CHILD_NAME, GEODE_INCARNATION).
Exit code 75 (EX_TEMPFAIL) when the store cannot open (unwritable directory, full disk), with the reason
on stderr.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from actors.bus import Bus
from actors.child_guard import report_ready
from geode.home import GeodeHome
from geode.protocol.errors import GeodeError
from geode.records.engine import RecordEngine
from geode.records.lmdb_env import StoreConfig
from geode.records.service import StoreService

if TYPE_CHECKING:
    from actors.registry import ChildContext

log = logging.getLogger(__name__)
ENDPOINT = "store"
EX_TEMPFAIL = 75


@dataclass
class StoreChild:
    """A running store: engine + bus endpoint. ``stop()`` closes the endpoint first, then the engine."""

    engine: RecordEngine
    bus: Bus
    owns_bus: bool
    stopping: threading.Event = field(default_factory=threading.Event)

    def stop(self) -> None:
        self.stopping.set()
        if self.owns_bus:
            self.bus.stop()
        self.engine.close()

    def prune_every(self, interval_s: float) -> None:
        """Apply retention periodically on a daemon thread (until :meth:`stop`)."""

        def loop() -> None:
            while not self.stopping.wait(interval_s):
                try:
                    pruned = self.engine.prune()
                    if any(pruned.values()):
                        log.info("store pruning: %s", pruned)
                except GeodeError as exc:
                    log.warning("store pruning failed: %s", exc)

        threading.Thread(target=loop, name="store-pruner", daemon=True).start()


def start_store(
    home: GeodeHome,
    *,
    name: str = "store",
    incarnation: int = 1,
    bus: Bus | None = None,
    config: StoreConfig | None = None,
    concurrency: int | None = None,
) -> StoreChild:
    """Open the engine and serve it (on ``bus`` when given, e.g. single-process mode; else a new one)."""
    cfg = config or StoreConfig.from_config(home.load_config())
    handlers = concurrency or cfg.handlers
    engine = RecordEngine.for_home(home, cfg).open()
    owns = bus is None
    try:
        if bus is None:
            bus = Bus(name, incarnation, home).start()
        bus.serve(ENDPOINT, StoreService(engine, name=name, incarnation=incarnation), concurrency=handlers)
    except BaseException:
        if owns and bus is not None:
            bus.stop()
        engine.close()
        raise
    child = StoreChild(engine, bus, owns)
    pruned = engine.prune()
    if any(pruned.values()):
        log.info("store start-up pruning: %s", pruned)
    if cfg.prune_interval_s > 0:
        child.prune_every(cfg.prune_interval_s)
    return child


def build(bus: Bus, ctx: ChildContext) -> StoreChild:
    """Registry builder (``actors.registry``): serve the store on the child's bus."""
    return start_store(ctx.home, name=ctx.name, incarnation=ctx.incarnation, bus=bus)


def main() -> int:
    home = GeodeHome.from_env()
    name = os.environ.get("GEODE_CHILD_NAME", "store")
    incarnation = int(os.environ.get("GEODE_INCARNATION", "1"))
    try:
        home.ensure()
    except OSError as exc:
        print(f"store: cannot open record store at {home.records_dir}: {exc}", file=sys.stderr, flush=True)
        return EX_TEMPFAIL
    try:
        child = start_store(home, name=name, incarnation=incarnation)
    except GeodeError as exc:
        print(f"store: {exc}", file=sys.stderr, flush=True)
        return EX_TEMPFAIL
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    report_ready()  # the supervisor's ready pipe, when there is one (it stays open: EOF = our exit)
    print("ready", flush=True)
    stop.wait()
    child.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
