"""The ``lanes`` child: serves LanesService at bus endpoint ``lanes`` over the store's durable turn records.

Hosted by ``python -m actors.tree.child_main lanes`` (registry builder :func:`build`). Loop workers connect to
``lanes`` as peers (READY, heartbeats); the supervisor tells it ``runtime.child_died``; a tick thread
reaps silent workers and expires orphaned turns.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from actors.bus import Bus
from geode.home import GeodeHome
from geode.lanes.queue import DEFAULT_GLOBAL_CAP, DEFAULT_SESSION_QUEUE, LaneQueue
from geode.lanes.service import LanesService
from geode.protocol.errors import GeodeError
from geode.records.store_client import StoreClient

if TYPE_CHECKING:
    from actors.tree.registry import ChildContext

log = logging.getLogger(__name__)
ENDPOINT = "lanes"
TICK_S = 0.25


@dataclass
class LanesChild:
    service: LanesService
    bus: Bus
    owns_bus: bool
    stop_event: threading.Event = field(default_factory=threading.Event)

    def stop(self) -> None:
        self.stop_event.set()
        if self.owns_bus:
            self.bus.stop()


def lanes_config(home: GeodeHome) -> dict[str, int]:
    raw = dict(home.load_config().get("lanes") or {})
    return {
        "global_cap": int(raw.get("global_cap", DEFAULT_GLOBAL_CAP)),
        "session_queue_max": int(raw.get("session_queue_max", DEFAULT_SESSION_QUEUE)),
        "handlers": int(raw.get("handlers", 32)),
    }


def _start_service(svc: LanesService, timeout_s: float) -> None:
    """Reload turn records; the store may still be starting, so retry within a bound."""
    deadline = time.monotonic() + timeout_s
    delay = 0.05
    while True:
        try:
            svc.start()
            return
        except GeodeError as exc:
            if time.monotonic() > deadline:
                raise
            log.info("lanes waiting for the store: %s", exc)
            time.sleep(delay)
            delay = min(delay * 2, 0.5)


def start_lanes(
    home: GeodeHome,
    *,
    name: str = "lanes",
    incarnation: int = 1,
    bus: Bus | None = None,
    store_timeout_s: float = 15.0,
) -> LanesChild:
    cfg = lanes_config(home)
    owns = bus is None
    bus = bus or Bus(name, incarnation, home).start()
    records = StoreClient(bus.transport, attempts=3)
    queue = LaneQueue(global_cap=cfg["global_cap"], session_queue_max=cfg["session_queue_max"])
    svc = LanesService(
        records,
        bus.transport,
        queue=queue,
        routable=lambda w: w in bus.peers(ENDPOINT),
        name=name,
        incarnation=incarnation,
        max_pending_approvals=max(1, cfg["handlers"] // 2),  # never starve the handlers of worker traffic
    )
    child = LanesChild(svc, bus, owns)
    try:
        _start_service(svc, store_timeout_s)
        bus.serve(ENDPOINT, svc, concurrency=cfg["handlers"], on_peer=lambda _name, _inc: svc.schedule())
    except BaseException:
        child.stop()
        raise

    def tick() -> None:
        while not child.stop_event.wait(TICK_S):
            try:
                svc.tick()
            except Exception:  # the tick must survive a store hiccup
                log.exception("lanes tick failed")

    threading.Thread(target=tick, name="lanes-tick", daemon=True).start()
    return child


def build(bus: Bus, ctx: ChildContext) -> LanesChild:
    """Registry builder (``actors.tree.registry``): host lanes on the child's bus."""
    return start_lanes(ctx.home, name=ctx.name, incarnation=ctx.incarnation, bus=bus)
