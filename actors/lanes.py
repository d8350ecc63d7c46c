"""The ``lanes`` child: one pykka actor owns the lanes state machine; bus handlers only post to it.

Hosted by ``python -m actors.tree.child_main lanes`` (registry builder :func:`build`). Every lanes message
becomes a message to :class:`LanesActor`; the store round trips it starts run on a few ``lanes-store``
threads (in order per turn) and come back to it as continuations, so the actor never waits for the store
and one session's slow write never holds up another's. A bus handler thread waits on a future only for
its own request (a submit until its record is stored, an approval until a person answers).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

import pykka

from actors.bus import Bus
from actors.bus.continued import ContinuedCalls
from geode.config_reload import MCP, ConfigChange
from geode.config_schema import GeodeConfig
from geode.config_source import ConfigSource
from geode.home import GeodeHome
from geode.lanes.continued_store import LanesStoreClient
from geode.lanes.keyed_runner import STORE_THREADS, KeyedRunner
from geode.lanes.queue import DEFAULT_GLOBAL_CAP, LaneQueue
from geode.lanes.records import Outcome, Then, TurnStore
from geode.lanes.service import Asked, LanesService, Reply
from geode.lanes.settings import LanesSection
from geode.lanes.stream_relay import relay_events
from geode.protocol import lifecycle, turns
from geode.protocol.envelope import now_ms
from geode.protocol.errors import GeodeError, RequestTimeout, Unavailable
from geode.protocol.later import Later
from geode.protocol.transport import Request
from geode.records.models import TurnState
from geode.tools.catalogue_plans import EXECUTOR, EXECUTOR_CHANGES

if TYPE_CHECKING:
    from actors.tree.registry import ChildContext

log = logging.getLogger(__name__)
ENDPOINT = "lanes"
TICK_S = 0.25
T = TypeVar("T")


@dataclass(frozen=True)
class _Op:
    request: Request
    future: pykka.Future[Reply] | Later | None  # None for a cast; a Later when served on the bus thread


@dataclass(frozen=True)
class _Then:
    then: Then
    out: Outcome


@dataclass(frozen=True)
class _Query:
    fn: Callable[[LanesService], Any]
    future: pykka.Future[Any]


@dataclass(frozen=True)
class _Settle:
    future: pykka.Future[None]


@dataclass(frozen=True)
class _PeerSeen:
    name: str


TICK, SCHEDULE, EXECUTOR_CHANGED = "tick", "schedule", "executor-changed"


def _answerer(op: _Op) -> Callable[[Reply | BaseException], None]:
    answered = [False]

    def answer(out: Reply | BaseException) -> None:
        if answered[0]:
            return
        answered[0] = True
        if op.future is None:
            if isinstance(out, BaseException):
                log.warning("lanes cast %s failed: %s", op.request.type, out)
        elif isinstance(op.future, Later):
            if isinstance(out, BaseException):
                op.future.fail(out)
            else:
                op.future.resolve(out)
        elif isinstance(out, BaseException):
            op.future.set_exception((type(out), out, out.__traceback__))
        else:
            op.future.set(out)

    return answer


class LanesActor(pykka.ThreadingActor):
    """Owns the :class:`LanesService`: its only thread. Requests, continuations and ticks are messages."""

    use_daemon_thread = True

    def __init__(self, core: LanesService) -> None:
        super().__init__()
        self.core = core
        self._settling: list[pykka.Future[None]] = []

    def on_receive(self, message: Any) -> Any:
        try:
            self._receive(message)
        except Exception:  # a bug must not stop the actor (pykka stops an actor on an unhandled error)
            log.exception("lanes actor failed on %s", type(message).__name__)
        if self._settling and self.core.inflight == 0:
            for f in self._settling:
                f.set(None)
            self._settling.clear()
        return None

    def _receive(self, message: Any) -> None:
        if isinstance(message, _Then):
            message.then(message.out)
        elif isinstance(message, _Op):
            answer = _answerer(message)
            try:
                self.core.handle(Asked(message.request.envelope, message.request.body, answer=answer))
            except Exception as exc:
                answer(exc)
                raise
        elif isinstance(message, _Query):
            try:
                message.future.set(message.fn(self.core))
            except Exception as exc:
                message.future.set_exception((type(exc), exc, exc.__traceback__))
        elif isinstance(message, _Settle):
            self._settling.append(message.future)
        elif isinstance(message, _PeerSeen):
            if self.core.peer_seen(message.name):
                log.info("asked %s again for its pending approvals (it (re)appeared)", message.name)
            self.core.schedule()
        elif message == EXECUTOR_CHANGED:
            self.core.executor_changed()
        elif message == TICK:
            self.core.tick()
        elif message == SCHEDULE:
            self.core.schedule()


class _DeskView:
    """Read the actor's approval desk from another thread (tests, status)."""

    def __init__(self, lanes: LanesHandle) -> None:
        self._lanes = lanes

    def pending(self) -> list[dict[str, str]]:
        return self._lanes.query(lambda core: core.desk.pending())


@dataclass
class LanesHandle:
    """The lanes actor from outside: ``handle`` is the bus Service (posts, then waits for its own answer).

    A worker's ``turn.event`` / ``turn.events`` is relayed on the calling thread (the bus thread:
    ``inline_types``) by ``relay``, the state machine's thread-safe stream relay: no hand-off to a handler or
    to the actor."""

    ref: pykka.ActorRef[LanesActor]
    records: TurnStore
    runner: KeyedRunner
    relay: Callable[[list[turns.TurnEvent], str], None] | None = None
    types: frozenset[str] = frozenset()  # every message type the state machine routes
    ask_timeout_s: float = 30.0
    desk: _DeskView = field(init=False)
    inline_types: ClassVar[frozenset[str]] = frozenset({turns.TURN_EVENT, turns.TURN_EVENTS})

    def __post_init__(self) -> None:
        self.desk = _DeskView(self)

    def handle(self, request: Request) -> Reply:
        if self.relay is not None and isinstance(request.body, turns.TurnEvent | turns.TurnEvents):
            body = request.body
            self.relay(body.events if isinstance(body, turns.TurnEvents) else [body], request.sender)
            return None
        if request.envelope.kind == "cast":
            self._tell(_Op(request, None))
            return None
        future: pykka.Future[Reply] = pykka.ThreadingFuture()
        self._tell(_Op(request, future))
        deadline = request.envelope.deadline
        wait = self.ask_timeout_s if deadline is None else max(0.0, (deadline - now_ms()) / 1000)
        try:
            return future.get(timeout=wait)
        except pykka.Timeout as exc:
            raise RequestTimeout(f"lanes did not answer {request.type} in time") from exc

    def handle_later(self, request: Request) -> Reply | Later:
        """As :meth:`handle`, but a request's answer is a ``Later`` the actor completes: nobody waits."""
        if request.envelope.kind == "cast" or isinstance(request.body, turns.TurnEvent | turns.TurnEvents):
            return self.handle(request)
        later = Later()
        self._tell(_Op(request, later))
        return later

    def query(self, fn: Callable[[LanesService], T], timeout_s: float = 10.0) -> T:
        """Run ``fn`` on the actor's thread (between two messages) and return its result."""
        future: pykka.Future[T] = pykka.ThreadingFuture()
        self._tell(_Query(fn, future))
        return future.get(timeout=timeout_s)

    def settle(self, timeout_s: float = 10.0) -> None:
        """Wait until no store round trip is in flight (every continuation has run)."""
        future: pykka.Future[None] = pykka.ThreadingFuture()
        self._tell(_Settle(future))
        future.get(timeout=timeout_s)

    def tell(self, message: str) -> None:
        """``TICK``, ``SCHEDULE`` or ``EXECUTOR_CHANGED``."""
        self._tell(message)

    def peer_seen(self, name: str, incarnation: int = 0) -> None:
        """A peer's first hello: schedule (a worker may be free) and re-ask its pending approvals."""
        self._tell(_PeerSeen(name))

    def _tell(self, message: Any) -> None:
        try:
            self.ref.tell(message)
        except pykka.ActorDeadError as exc:
            raise Unavailable("lanes is stopping") from exc

    def stop(self) -> None:
        self.runner.stop()
        try:
            self.ref.stop(block=True, timeout=5.0)
        except (pykka.ActorDeadError, pykka.Timeout):
            pass


@dataclass(frozen=True)
class DeferredLanes:
    """The lanes handle as the bus serves it: every lanes message is taken on the bus thread
    (``inline_types``); a request is told to the actor and answered when the actor answers (a ``Later``: no
    handler thread waits for the actor), a worker's ``turn.event`` is relayed at once (issue 34)."""

    lanes: LanesHandle

    @property
    def inline_types(self) -> frozenset[str]:
        return self.lanes.types | LanesHandle.inline_types  # ``turn.events`` is relayed, never routed

    def handle(self, request: Request) -> Reply | Later:
        return self.lanes.handle_later(request)


def start_lanes_actor(
    records: TurnStore,
    transport: Any,
    *,
    store_threads: int = STORE_THREADS,
    load_timeout_s: float = 15.0,
    runner: KeyedRunner | None = None,
    **core_options: Any,
) -> LanesHandle:
    """Reload the durable turn records, then start the actor that owns the lanes state machine."""
    running, queued = _load_records(records, load_timeout_s)
    runner = runner or KeyedRunner(store_threads)
    core = LanesService(records, transport, runner=runner, **core_options)
    ref = LanesActor.start(core)

    def deliver(then: Then, out: Outcome) -> None:
        try:
            ref.tell(_Then(then, out))
        except pykka.ActorDeadError:
            log.debug("lanes stopped before a store reply arrived")

    runner.deliver = deliver
    lanes = LanesHandle(ref, records, runner, relay=partial(relay_events, core), types=core.dispatch.types)
    lanes.query(lambda c: c.load(running, queued))
    return lanes


def _load_records(records: TurnStore, timeout_s: float) -> tuple[list[Any], list[Any]]:
    """Read running and queued turn records; the store may still be starting, so retry within a bound."""
    deadline = time.monotonic() + timeout_s
    delay = 0.05
    while True:
        try:
            return (
                records.list_turns(state=TurnState.RUNNING.value),
                records.list_turns(state=TurnState.QUEUED.value),
            )
        except GeodeError as exc:
            if time.monotonic() > deadline:
                raise
            log.info("lanes waiting for the store: %s", exc)
            time.sleep(delay)
            delay = min(delay * 2, 0.5)


@dataclass
class LanesChild:
    lanes: LanesHandle
    bus: Bus
    owns_bus: bool
    stop_event: threading.Event = field(default_factory=threading.Event)

    def apply_config(self, change: ConfigChange, settings: object) -> list[str]:
        """`geode reload` changed main's MCP servers: remote loop workers ask for the catalogue again."""
        if MCP in change.areas:
            self.lanes.tell(EXECUTOR_CHANGED)  # told after the executor reloaded its hub (reload_cmd.ROUNDS)
        return []

    def stop(self) -> None:
        self.stop_event.set()
        self.lanes.stop()
        if self.owns_bus:
            self.bus.stop()


def lanes_config(home: GeodeHome) -> LanesSection:
    """The home's typed ``[lanes]`` read once (defaults in the schema; a bad value is a ``ConfigError``)."""
    return ConfigSource(home, GeodeConfig.from_raw).snapshot.lanes


def start_lanes(
    home: GeodeHome,
    *,
    name: str = "lanes",
    incarnation: int = 1,
    bus: Bus | None = None,
    store_timeout_s: float = 15.0,
    settings: LanesSection | None = None,
) -> LanesChild:
    cfg = settings or lanes_config(home)
    owns = bus is None
    bus = bus or Bus(name, incarnation, home).start()
    runner, calls = KeyedRunner(), ContinuedCalls(bus)  # puts continued by callback (continued_store)
    try:
        calls.bus_reads("store")
        lanes = start_lanes_actor(
            LanesStoreClient(bus.transport, calls, runner.offload, attempts=3),
            bus.transport,
            load_timeout_s=store_timeout_s,
            runner=runner,
            queue=LaneQueue(
                global_cap=cfg.global_cap or min(cfg.max_global_cap, DEFAULT_GLOBAL_CAP),
                session_queue_max=cfg.session_queue_max,
            ),
            cap_ceiling=None if cfg.global_cap else cfg.max_global_cap,
            routable=lambda w: w in bus.peers(ENDPOINT),
            name=name,
            incarnation=incarnation,
            max_pending_approvals=max(1, cfg.handlers // 2),  # never starve the handlers of worker traffic
            max_requeues=cfg.max_requeues,
        )
    except BaseException:
        if owns:
            bus.stop()
        raise
    child = LanesChild(lanes, bus, owns)

    def on_lifecycle(topic: str, event: lifecycle.ChildEvent) -> None:
        """Main's executor started, became ready or exited: remote loop workers hear it in their beats."""
        if topic in EXECUTOR_CHANGES and event.name == EXECUTOR:
            try:
                lanes.tell(EXECUTOR_CHANGED)
            except Unavailable:
                pass

    bus.subscribe("supervisor", lifecycle.on_child_events(on_lifecycle))
    try:
        bus.serve(ENDPOINT, DeferredLanes(lanes), concurrency=cfg.handlers, on_peer=lanes.peer_seen)
    except BaseException:
        child.stop()
        raise

    def tick() -> None:
        while not child.stop_event.wait(TICK_S):
            calls.sweep()  # a continued put past its deadline: RequestTimeout, as a waiting caller's
            try:
                lanes.tell(TICK)
            except Unavailable:
                return

    threading.Thread(target=tick, name="lanes-tick", daemon=True).start()
    return child


def build(bus: Bus, ctx: ChildContext) -> LanesChild:
    """Registry builder (``actors.tree.registry``): host lanes on the child's bus."""
    return start_lanes(
        ctx.home, name=ctx.name, incarnation=ctx.incarnation, bus=bus, settings=ctx.settings.lanes
    )
