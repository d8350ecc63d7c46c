"""The ``store`` child: the only writer of the LMDB record store, served at bus endpoint ``store``.

Hosted by ``actors.tree.child_main`` through :func:`build`; a store that cannot open fails the child's start.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from actors.bus import Bus
from geode.config_schema import GeodeConfig
from geode.config_source import ConfigSource
from geode.home import GeodeHome
from geode.protocol.errors import GeodeError
from geode.records.engine import RecordEngine
from geode.records.search_feed import SearchFeed
from geode.records.service import StoreService
from geode.records.settings import StoreConfig

if TYPE_CHECKING:
    from actors.tree.registry import ChildContext

log = logging.getLogger(__name__)
ENDPOINT = "store"


@dataclass
class StoreChild:
    """A running store: engine + bus endpoint. ``stop()`` closes the endpoint first, then the engine."""

    engine: RecordEngine
    bus: Bus
    owns_bus: bool
    search: SearchFeed | None = None  # the search index's writer (store.search.*)
    stopping: threading.Event = field(default_factory=threading.Event)

    def stop(self) -> None:
        self.stopping.set()
        if self.owns_bus:
            self.bus.stop()
        if self.search is not None:
            self.search.stop()
        self.engine.close()

    def prune_every(self, interval_s: float) -> None:
        """Apply retention periodically on a daemon thread (until :meth:`stop`)."""

        def loop() -> None:
            while not self.stopping.wait(interval_s):
                try:
                    pruned = self.engine.prune()
                    if self.search is not None and pruned.get("sessions"):
                        self.search.request_sync()  # the index drops the pruned sessions too
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
    cfg = config or ConfigSource(home, GeodeConfig.from_raw).snapshot.store  # standalone: the file, once
    handlers = concurrency or cfg.handlers
    engine = RecordEngine.for_home(home, cfg).open()
    owns = bus is None
    search: SearchFeed | None = None
    try:
        search = _start_search(engine, home)
        if bus is None:
            bus = Bus(name, incarnation, home).start()
        service = StoreService(engine, name=name, incarnation=incarnation, search=search)
        bus.serve(ENDPOINT, service, concurrency=handlers)
    except BaseException:
        if owns and bus is not None:
            bus.stop()
        if search is not None:
            search.stop()
        engine.close()
        raise
    child = StoreChild(engine, bus, owns, search)
    pruned = service.prune()
    if any(pruned.values()):
        log.info("store start-up pruning: %s", pruned)
    if cfg.prune_interval_s > 0:
        child.prune_every(cfg.prune_interval_s)
    return child


def _start_search(engine: RecordEngine, home: GeodeHome) -> SearchFeed | None:
    """The search index's feed, synced with the records at start; an index that cannot be opened at all
    (an unwritable file) is logged and leaves the store without search, never without its records."""
    try:
        return SearchFeed.for_engine(engine, home.root).start()
    except (sqlite3.Error, OSError) as exc:
        log.warning("search index unavailable: %s: %s", type(exc).__name__, exc)
        return None


def build(bus: Bus, ctx: ChildContext) -> StoreChild:
    """Registry builder: serve the store on the child's bus; stop closes the bus first."""
    child = start_store(
        ctx.home, name=ctx.name, incarnation=ctx.incarnation, bus=bus, config=ctx.settings.store
    )
    child.owns_bus = True
    return child
