"""The ``webhooks`` child (daemon tree only, when ``[webhooks] listen`` is set): serves the webhook HTTP app
(:mod:`geode.webhooks.http_app`) on its own thread and event loop, records each authenticated delivery in
the store's intake table before the sender's 2xx, and runs the webhook runner (:mod:`geode.webhooks.runner`)
on another thread: each intake becomes an AUTOMATION turn submitted to lanes (origin ``webhooks``: lanes
streams its ``turn_done`` here), its answer posted to the route's chat through the executor's receipted
``messenger.deliver``. It serves ``webhooks.*`` (:mod:`geode.protocol.webhooks`) and the runtime requests.

A listen address that cannot be bound is one line in ``logs/webhooks.log`` and a non-zero exit (the
supervisor's backoff shows it). ``geode reload`` re-applies the routes and their ``.env`` secrets; a new
``listen`` needs ``geode serve`` again. Secrets are read from this child's config source's ``.env`` on
every request, never logged.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
from collections import deque
from typing import TYPE_CHECKING, Any

from aiohttp import web

from actors.bus import Bus
from geode.config_reload import WEBHOOKS, ConfigChange
from geode.home_secrets import session_id_key
from geode.lanes.stream import each_event
from geode.protocol import lanes as lanes_msg
from geode.protocol import runtime
from geode.protocol import webhooks as m
from geode.protocol.dispatch import Dispatch
from geode.protocol.errors import BadRequest, ConfigError, GeodeError, NotFound
from geode.protocol.transport import Request
from geode.records.intake_client import IntakeClient
from geode.records.intake_models import IntakeRow
from geode.records.store_client import StoreClient
from geode.tools.catalogue_plans import CataloguePlans
from geode.webhooks.auth import route_secrets
from geode.webhooks.bus_ports import BusChat, BusIntake, BusLanes, BusTimeline
from geode.webhooks.counters import Counters
from geode.webhooks.http_app import INTAKE, make_app, status_url
from geode.webhooks.runner import Runner
from geode.webhooks.session import route_turn_settings, route_workspace
from geode.webhooks.settings import RouteSpec, listen_address

if TYPE_CHECKING:
    from actors.tree.config_sections import TreeSettings
    from actors.tree.registry import ChildContext

log = logging.getLogger(__name__)
TICK_S = 0.5  # how often the runner looks without being woken


class WebhooksProcess:
    """The runner's thread, the HTTP app's thread, and the ``webhooks.*`` handlers."""

    def __init__(self, ctx: ChildContext, bus: Bus, plans: CataloguePlans) -> None:
        self.ctx, self.bus, self.plans = ctx, bus, plans
        self.store = StoreClient(bus.transport, attempts=3)
        self.intakes = IntakeClient(bus.transport, attempts=3)
        self.key = session_id_key(ctx.home)
        self.listen = ctx.settings.webhooks.listen
        self.routes = {r.name: r for r in ctx.settings.webhooks.routes}
        self.counters = Counters()
        self.port = BusIntake(self.intakes, self.store, self._recorded)
        self.inbox: deque[tuple[str, Any]] = deque()  # ("add", row) | ("done", turn_id), from other threads
        self.runner = Runner(
            self.intakes,
            BusLanes(bus.transport, self.store),
            BusChat(bus.transport),
            BusTimeline(self.store),
            routes=self.routes,
            settings=self._turn_settings,
            workspace=lambda route: route_workspace(route, ctx.home),
            clock=time.monotonic,
            wall=time.time,
        )
        self.wake, self.stopping = threading.Event(), threading.Event()
        self.started = time.monotonic()
        self.last_error = ""
        self.loop: asyncio.AbstractEventLoop | None = None
        self.site_runner: web.AppRunner | None = None
        self.app: web.Application | None = None
        self.thread = threading.Thread(target=self._run, name="webhooks-runner", daemon=True)
        self.http_thread: threading.Thread | None = None

    def _recorded(self, row: IntakeRow) -> None:
        """A new intake (from the app's threads or a replay): the runner's thread submits it."""
        self.inbox.append(("add", row))
        self.wake.set()

    def _turn_settings(self, route: RouteSpec, row: IntakeRow) -> dict[str, Any]:
        return route_turn_settings(
            route,
            delivery_id=row.delivery_id,
            config=self.ctx.source.snapshot,
            home=self.ctx.home,
            plans=self.plans,
            env=self.ctx.source.env,
        )

    def secrets(self, route_name: str) -> list[bytes]:
        """The route's secrets, read from ``.env`` as of the start or the last reload (one-line errors)."""
        route = self.routes.get(route_name)
        if route is None:
            raise ConfigError(f"webhooks: no route named {route_name!r}")
        return route_secrets(route, self.ctx.source.env)

    # --- the HTTP app -------------------------------------------------------------------------------------
    def serve_http(self) -> None:
        """Bind ``[webhooks] listen`` on the app's own thread; a failure to bind is a ``ConfigError``."""
        address = listen_address(self.ctx.settings.webhooks)
        if address is None:
            raise ConfigError("webhooks: [webhooks] listen is empty: the child has nothing to serve")
        host, port_no = address
        ready, failed = threading.Event(), []

        def run() -> None:
            loop = asyncio.new_event_loop()
            asyncio.set_event_loop(loop)
            self.loop = loop
            try:
                loop.run_until_complete(self._start_site(host, port_no))
            except OSError as exc:
                failed.append(f"webhooks: cannot listen on {self.listen}: {exc.strerror or exc}")
                self.loop = None
                loop.close()
                ready.set()
                return
            ready.set()
            loop.run_forever()
            if self.site_runner is not None:
                loop.run_until_complete(self.site_runner.cleanup())
            loop.close()

        self.http_thread = threading.Thread(target=run, name="webhooks-http", daemon=True)
        self.http_thread.start()
        ready.wait(30.0)
        if failed:
            raise ConfigError(failed[0])
        log.info("webhooks: listening on %s (%d routes)", self.listen, len(self.routes))

    def _app(self) -> web.Application:
        self.app = make_app(
            list(self.routes.values()),
            self.port,
            secrets=self.secrets,
            trusted_proxies=self.ctx.settings.webhooks.trusted_proxies,
            key=self.key,
            clock=time.time,
            counters=self.counters,
        )
        return self.app

    async def _start_site(self, host: str, port_no: int) -> None:
        runner = web.AppRunner(self._app(), access_log=None)
        await runner.setup()
        try:
            await web.TCPSite(runner, host, port_no, reuse_address=True).start()
        except OSError:
            await runner.cleanup()
            raise
        self.site_runner = runner

    # --- the runner ---------------------------------------------------------------------------------------
    def start(self) -> None:
        self.thread.start()

    def _run(self) -> None:
        while not self.stopping.is_set():
            try:
                while self.inbox:
                    what, item = self.inbox.popleft()
                    if what == "add":
                        self.runner.add(item)
                    else:
                        self.runner.turn_done(item)
                self.runner.tick()
                self.last_error = self.runner.last_error
            except GeodeError as exc:  # the store restarting (the open intakes not read yet): try again
                self.last_error = exc.message[:500]
                log.info("webhooks: %s", exc.message)
            except Exception as exc:  # never let the loop die silently: say it, keep going
                self.last_error = f"{type(exc).__name__}: {exc}"[:500]
                log.exception("webhooks: the runner's pass failed")
            self.wake.wait(TICK_S)
            self.wake.clear()

    def stop(self) -> None:
        self.stopping.set()
        self.wake.set()
        if self.loop is not None:
            self.loop.call_soon_threadsafe(self.loop.stop)
        for thread in (self.http_thread, self.thread):
            if thread is not None and thread.ident is not None:
                thread.join(timeout=5.0)

    def _origin_event(self, b: lanes_msg.StreamEvent, r: Request) -> None:
        if b.kind == lanes_msg.TURN_DONE:
            self.inbox.append(("done", b.turn_id))
            self.wake.set()

    # --- reload -------------------------------------------------------------------------------------------
    def apply_config(self, change: ConfigChange, settings: TreeSettings) -> list[str]:
        """``geode reload``: the new routes (and their secrets, read per request from the re-read ``.env``)
        served at once by a new app on the same socket; a new ``listen`` needs ``geode serve`` again."""
        if WEBHOOKS not in change.areas and settings.webhooks.listen == self.listen:
            return []
        lines = []
        new = {r.name: r for r in settings.webhooks.routes}
        if new != self.routes:
            self.routes = new
            self.runner.set_routes(new)
            if self.app is not None:
                app, routes = self.app, list(new.values())
                self._on_loop(lambda: app[INTAKE].reconfigure(routes))
            lines.append(f"webhooks: routes re-applied ({', '.join(sorted(new)) or 'none'})")
        else:
            lines.append("webhooks: secrets re-read")
        if settings.webhooks.listen != self.listen:
            lines.append(f"webhooks: listen {settings.webhooks.listen!r} needs geode serve again")
        return lines

    def _on_loop(self, fn: Any) -> None:
        """Run ``fn`` on the app's event loop (its state is the loop's) and wait for it."""
        loop = self.loop
        if loop is None:
            fn()
            return

        async def call() -> None:
            fn()

        asyncio.run_coroutine_threadsafe(call(), loop).result(timeout=15.0)

    # --- webhooks.* and runtime ---------------------------------------------------------------------------
    def dispatch(self) -> Dispatch:
        return Dispatch(
            self.ctx.name,
            {
                runtime.PING: lambda b, r: runtime.Pong(
                    name=self.ctx.name, incarnation=self.ctx.incarnation, pid=os.getpid()
                ),
                runtime.STATUS: self._status,
                runtime.CHILD_DIED: lambda b, r: runtime.Ack(),
                m.ROUTES: self._routes,
                m.REPLAY: self._replay,
                lanes_msg.ORIGIN_EVENT: self._origin_event,
                lanes_msg.ORIGIN_EVENTS: each_event(self._origin_event),
            },
        )

    def _counters(self) -> dict[str, m.RouteCounters]:
        try:
            counts = self.intakes.counts()
            per_state, open_ = counts.routes, counts.open
        except GeodeError as exc:  # the store restarting: the app's counters still say what it did
            self.last_error = exc.message[:500]
            per_state, open_ = {}, {}
        out = {}
        for name in self.routes:
            c = self.counters.route(name)
            out[name] = m.RouteCounters(
                accepted=c.accepted,
                replayed=c.replayed,
                rejected=dict(c.rejected),
                rate_limited=c.rate_limited,
                queued=open_.get(name, 0),
                done=per_state.get(name, {}).get("done", 0),
            )
        return out

    def _routes(self, b: m.ListRoutes, r: Request) -> m.RoutesReply:
        counters = self._counters()
        views = [
            m.RouteView(
                name=rt.name,
                path=rt.path,
                auth=rt.auth,
                deliver=rt.deliver.destination if rt.deliver is not None else "",
                counters=counters[rt.name],
            )
            for rt in self.routes.values()
        ]
        return m.RoutesReply(listen=self.listen, routes=views)

    def _replay(self, b: m.Replay, r: Request) -> m.ReplayReply:
        if b.route and b.route not in self.routes:
            raise NotFound(f"webhooks: no route named {b.route!r} (geode webhooks lists them)")
        names = [b.route] if b.route else sorted(self.routes)
        held = [n for n in names if self.intakes.get(n, b.delivery_id) is not None]
        if not held:
            where = f"route {b.route!r}" if b.route else "any configured route"
            raise NotFound(
                f"webhooks: no stored delivery {b.delivery_id!r} of {where} (geode webhooks lists them)"
            )
        if len(held) > 1:
            raise BadRequest(
                f"webhooks: delivery {b.delivery_id!r} is stored for {', '.join(held)}: name the route"
            )
        route = self.routes[held[0]]
        got = self.intakes.replay(
            b.delivery_id, route=route.name, queue_max=route.queue_max, client="operator"
        )
        if got.full or got.row is None:
            raise BadRequest(
                f"webhooks: route {route.name!r}'s queue is full ({got.open} open): replay it later"
            )
        row = got.row
        if not got.replayed:
            self._recorded(row)
        return m.ReplayReply(
            route=row.route,
            delivery_id=row.delivery_id,
            turn_id=row.turn_id,
            status_url=status_url(self.key, row.turn_id),
        )

    def _status(self, b: runtime.StatusQuery, r: Request) -> runtime.StatusReply:
        counters = {name: c.model_dump() for name, c in self._counters().items()}
        detail = {
            "listen": self.listen,
            "routes": sorted(self.routes),
            "counters": counters,
            "open": self.runner.open_count(),
            "last_error": self.last_error,
            "uptime_s": round(time.monotonic() - self.started, 3),
        }
        return runtime.StatusReply(
            name=self.ctx.name, incarnation=self.ctx.incarnation, pid=os.getpid(), detail=detail
        )


def build(bus: Bus, ctx: ChildContext) -> WebhooksProcess:
    """Registry builder (``actors.tree.registry``): bind the listen address (or exit), serve ``webhooks``,
    connect to lanes as a peer for the origin events of its turns, then start the runner."""
    plans = CataloguePlans(bus.transport, wait=False, who=ctx.name, cache=False)
    from geode.protocol import lifecycle

    bus.subscribe("supervisor", lifecycle.on_child_events(plans.on_lifecycle))
    plans.prefetch()
    proc = WebhooksProcess(ctx, bus, plans)
    proc.serve_http()  # a bind failure: ConfigError, one line in the log, exit 75
    bus.serve(ctx.name, proc.dispatch())
    on_event = proc._origin_event
    stream = Dispatch(
        f"{ctx.name} (lanes peer)",
        {lanes_msg.ORIGIN_EVENT: on_event, lanes_msg.ORIGIN_EVENTS: each_event(on_event)},
    )
    bus.connect_peer("lanes", stream, concurrency=1)
    proc.start()
    return proc
