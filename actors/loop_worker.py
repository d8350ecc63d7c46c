"""The ``loop`` child: a pool worker of ``lanes`` hosting one pykka actor per running turn.

It connects to ``lanes`` as a peer, announces ``worker.ready`` and heartbeats; each ``turn.run`` starts a
:class:`TurnActor` that runs :class:`geode.loop.AgenticLoop` (provider from ``geode.providers.selection``,
executor and store over the bus), casts ``turn.event`` to lanes and finishes with ``turn.done``. On failure
the worker never releases lanes itself: a dead worker is found by supervision / missed heartbeats. When the
supervisor reports the executor exited, the calls in flight to it fail at once (outcome uncertain).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from functools import partial
from queue import SimpleQueue
from typing import TYPE_CHECKING, Any, cast

import pykka

from actors.bus import Bus
from actors.tree.registry import ChildContext
from geode.config_reload import MCP, ConfigChange
from geode.hooks.events import HookEvent
from geode.loop import AgenticLoop, LoopSettings, tracing
from geode.loop.event_batch import EventBatch, quiet_tools
from geode.loop.membership import PoolMembership
from geode.loop.retirement import Retirement, early_hold_s
from geode.loop.reused_threads import TURNS
from geode.loop.state import CancelFlag, turn_images
from geode.loop.turn_providers import ProviderFactory, TurnProviders
from geode.loop.turn_reports import LanesSink, report_done
from geode.protocol import lifecycle, turns
from geode.protocol.dispatch import Dispatch
from geode.protocol.errors import GeodeError
from geode.protocol.transport import Request
from geode.records.store_client import StoreClient
from geode.sessions.transcript import TranscriptingRecords
from geode.sessions.turn_setup import ComposedTurn, compose_turn, loop_hooks
from geode.telemetry import spans
from geode.tools.catalogue_plans import CataloguePlans
from geode.tools.executor_client import ExecutorClient, ExecutorLost
from geode.tools.plan import BoundToolPlan

if TYPE_CHECKING:
    from actors.tree.config_sections import TreeSettings

log = logging.getLogger(__name__)
LANES = "lanes"
EXECUTOR = "executor"
PlanFactory = Callable[[], BoundToolPlan | None]  # the whole catalogue as a plan (None: no tools)


RUN, STATUS, FINISHED = "run", "status", "finished"


class TurnActor(pykka.ThreadingActor):
    """Owns one running turn: its phase and cancel event. Messages: ``run`` (start the loop on the turn's
    thread), a :class:`turns.TurnCancel` (set the cancel event, ask the executor to stop what runs now),
    ``status`` (ask: a snapshot). The turn's thread reports ``turn.done`` and tells ``finished``: it stops.

    The loop runs on its own thread so the actor stays free for ``cancel`` and ``status`` mid-turn (the
    actor's and the loop's threads are reused ones)."""

    use_daemon_thread = True

    def _start_actor_loop(self) -> None:  # pykka's hook for where an actor's loop runs
        TURNS.run_fresh(self._actor_loop, f"TurnActor-{self.run.turn_id[:12]}")

    @staticmethod
    def _create_actor_inbox() -> SimpleQueue[Any]:
        """pykka's hook for the inbox (its ``ActorInbox``: put, get, empty): a C ``SimpleQueue``, not the
        ``queue.Queue`` of three Conditions made per actor and taken at each put and get (a turn's actor is
        made, told ``run`` and ``finished`` and stopped once a turn; the same FIFO, one message at a time)."""
        return SimpleQueue()

    def __init__(self, worker: LoopWorker, run: turns.TurnRun) -> None:
        super().__init__()
        self.worker = worker
        self.run = run
        self.trace = spans.current()  # the push's trace context (started on the handler's thread)
        self.cancel = CancelFlag()
        self.phase = "accepted"  # accepted → running → reporting → done
        self.cancel_reason: str | None = None
        self.started_at: float | None = None

    def on_receive(self, message: Any) -> Any:
        if message == RUN and self.phase == "accepted":
            self.phase, self.started_at = "running", time.monotonic()
            TURNS.run_fresh(self._body, f"turn-{self.run.turn_id[:12]}")
        elif isinstance(message, turns.TurnCancel):
            return self._cancel(message)
        elif message == STATUS:
            return {
                "turn_id": self.run.turn_id,
                "session_id": self.run.session_id,
                "phase": self.phase,
                "cancelled": self.cancel.is_set(),
                "cancel_reason": self.cancel_reason,
                "running_s": round(time.monotonic() - self.started_at, 3) if self.started_at else 0.0,
            }
        elif message == FINISHED:
            self.phase = "done"
            self.stop()
        return None

    def _cancel(self, body: turns.TurnCancel) -> bool:
        if self.phase not in ("accepted", "running") or self.cancel.is_set():
            return False
        self.cancel.set()
        self.cancel_reason = body.reason
        # the executor kills what runs now (the loop also asks, between its polls)
        self.worker._cancel_in_executor(body.session_id or self.run.session_id, self.run.turn_id)
        return True

    def _body(self) -> None:
        """The turn's thread: the loop, then ``turn.done`` until lanes acknowledges it."""
        try:
            with tracing.turn_span(self.run, self.trace) as sp:
                result, last = self.worker.run_turn_held(self.run, self.cancel)
                tracing.turn_ended(sp, result)
                self.phase = "reporting"
                self.worker.report_done(self.run, result, events=last)
        finally:
            self.worker.turn_finished(self.run.turn_id)
            try:
                self.actor_ref.tell(FINISHED)
            except pykka.ActorDeadError:
                pass


class LoopWorker:
    """The peer service lanes pushes to, plus the worker's pool membership (ready + heartbeats)."""

    def __init__(
        self,
        bus: Bus,
        ctx: ChildContext,
        *,
        capacity: int = 2,
        provider_factory: ProviderFactory | None = None,
        plan_factory: PlanFactory | None = None,
        heartbeat_s: float = 1.0,
        name: str | None = None,
        remote: bool = False,
        address: str = "",
    ) -> None:
        self.bus = bus
        self.ctx = ctx
        self.name = name or ctx.name  # ``HOST/loop-1`` on a worker host
        self.remote = remote  # on a worker host: exit for a new incarnation when main stops answering
        self.address = address  # on a worker host: its address towards main (for main's geode status)
        self.incarnation = ctx.incarnation
        self.capacity = capacity
        self.heartbeat_s = heartbeat_s
        # checkpoint saves also append to $GEODE_HOME/transcripts/<session>.jsonl (hooks' transcript_path)
        self.records = TranscriptingRecords(StoreClient(bus.transport, attempts=4), ctx.home.root)
        self.tools = ExecutorClient(bus.transport)
        self.sink = LanesSink(bus.transport)
        self.providers = TurnProviders(ctx.home, self.name, provider_factory, source=ctx.source)
        # the executor's catalogue (built-ins + MCP overlay), cached until the executor's incarnation changes
        self.plans = CataloguePlans(bus.transport, who=ctx.name)
        self.plan_factory = plan_factory or self.plans.base
        self._running: dict[str, pykka.ActorRef[TurnActor]] = {}  # turn id -> the turn's actor
        self.peer = Dispatch(self.name, {turns.TURN_RUN: self.accept, turns.TURN_CANCEL: self.cancel})
        self._lock = threading.Lock()
        self.early_hold_s = early_hold_s()  # forked before the SDKs: capacity 0 until swapped
        offered = 0 if self.early_hold_s else capacity
        ready = turns.WorkerReady(
            worker=self.name, incarnation=self.incarnation, capacity=offered, address=address
        )
        self.membership = PoolMembership(
            bus.transport,
            ready,
            heartbeat_s=heartbeat_s,
            remote=remote,
            running=self._running_ids,
            on_ready=self._on_ready,
            on_beat=lambda: None,
            on_executor_changed=self.plans.executor_changed,
        )
        # drain-and-swap (forked before the zygote had the SDKs): no new turn, then exit for a fork with them
        self.retirement = Retirement(self.membership, lock=self._lock, running=lambda: len(self._running))
        self.settings = ctx.settings  # the child's snapshot: [loop] / [verify] / [daemon] / [hooks]
        self.hooks = loop_hooks(self.settings, ctx.home.root)

    # --- lifecycle ------------------------------------------------------------------------------------
    def start(self) -> LoopWorker:
        events = lifecycle.on_child_events(self.on_lifecycle)
        retire = self.retirement.request
        self.bus.subscribe("supervisor", lifecycle.on_retire(self.ctx.name, self.incarnation, retire, events))
        # lanes (re)connected: heartbeat now, not at the next interval
        self.bus.connect_peer(LANES, self.handle, concurrency=2, on_connected=self.membership.beat_now.set)
        self.membership.start()
        if self.early_hold_s:
            self.retirement.hold(self.capacity, self.early_hold_s)
        return self

    def stop(self) -> None:
        """Stop announcing. Running turns are left alone (their threads are daemons): a turn cut short by
        the process exiting is exactly a crash, which lanes re-queues and the next incarnation resumes from
        its checkpoint. Finishing them as cancelled here would wrongly record them as done."""
        self.membership.stop()

    def _on_ready(self) -> None:
        self.providers.describe()
        log.info("%s#%d ready with capacity %d", self.name, self.incarnation, self.capacity)
        self.providers.start_warm_up()

    def _running_ids(self) -> list[str]:
        with self._lock:
            return list(self._running)

    def apply_config(self, change: ConfigChange, settings: TreeSettings) -> list[str]:
        """`geode reload` (actors/tree/reload_rule.py): ``[loop]``, ``[verify]``, providers and hooks for the
        next turn; new MCP servers: the executor's catalogue is asked again (it reloaded its hub first)."""
        self.settings, self.hooks = settings, loop_hooks(settings, self.ctx.home.root)
        if MCP in change.areas:
            self.plans.executor_changed()
        self.providers.describe()
        return sorted(change.areas)

    def on_lifecycle(self, topic: str, event: lifecycle.ChildEvent) -> None:
        """Supervisor events: the executor exited → its in-flight calls get no reply; fail them now.

        Only requests already sent are failed (never re-sent: the receipt is uncertain, the store marks it);
        calls sent after this go to the next incarnation and run normally."""
        self.plans.on_lifecycle(topic, event)  # a new executor incarnation: ask for its catalogue again
        if topic != lifecycle.CHILD_EXITED or event.name != EXECUTOR or self.remote:
            return  # on a worker host the local executor is not the one this worker calls (main's is)
        self.tools.forget_bound()  # the next incarnation has no plans: the next turns bind theirs again
        who = f"{EXECUTOR}#{event.incarnation}"
        err = ExecutorLost(f"{who} exited ({event.reason or 'unknown'}) with this request in flight")
        try:
            n = self.bus.fail_pending(EXECUTOR, err)
        except GeodeError as exc:
            log.warning("could not fail the calls in flight to %s: %s", who, exc)
            return
        log.log(logging.WARNING if n else logging.INFO, "%s exited: %d call(s) in flight failed", who, n)

    # --- peer service ---------------------------------------------------------------------------------
    def handle(self, request: Request) -> Any:
        """The peer service lanes pushes to: ``turn.run`` and ``turn.cancel`` (one Dispatch table)."""
        return self.peer.handle(request)

    def accept(self, run: turns.TurnRun, request: Request | None = None) -> turns.TurnRunAccepted:
        """Start the turn's actor (idempotent by turn id: a repeated run is acknowledged, not re-run)."""
        with self._lock:  # guards the map only: nothing waits on another process under it
            if run.turn_id in self._running:
                return turns.TurnRunAccepted(accepted=True, worker=self.name, reason="already running")
            if not self.retirement.admit():  # never started here: lanes re-queues it when this exit is told
                log.warning("turn %s refused: %s is retiring for its replacement", run.turn_id, self.name)
                return turns.TurnRunAccepted(accepted=False, worker=self.name, reason="retiring")
            ref = TurnActor.start(self, run)
            self._running[run.turn_id] = ref
        ref.tell(RUN)
        log.info("turn %s accepted (attempt %d%s)", run.turn_id, run.attempt, " resume" if run.resume else "")
        return turns.TurnRunAccepted(accepted=True, worker=self.name)

    def cancel(self, body: turns.TurnCancel, request: Request | None = None) -> turns.Ack:
        """Pass the cancel to the turn's actor; ``ok`` is False when no such turn runs here."""
        with self._lock:
            ref = self._running.get(body.turn_id)
        if ref is None:
            return turns.Ack(ok=False)
        try:
            ref.tell(body)
        except pykka.ActorDeadError:  # it just finished
            return turns.Ack(ok=False)
        return turns.Ack(ok=True)

    def turn_status(self, timeout_s: float = 2.0) -> list[dict[str, Any]]:
        """Each running turn's actor, asked for its status (a finished one is skipped)."""
        with self._lock:
            refs = list(self._running.values())
        out: list[dict[str, Any]] = []
        for ref in refs:
            try:
                out.append(cast(dict[str, Any], ref.ask(STATUS, timeout=timeout_s)))
            except (pykka.ActorDeadError, pykka.Timeout):
                continue
        return out

    def turn_finished(self, turn_id: str) -> None:
        with self._lock:
            self._running.pop(turn_id, None)

    def _cancel_in_executor(self, session_id: str, turn_id: str) -> None:
        """Ask the executor to stop the turn's calls and prompts (called on the turn actor's thread)."""
        try:
            touched = self.tools.cancel(session_id, turn_id)
            log.info("turn %s cancelled: %d call(s)/prompt(s) in the executor touched", turn_id, touched)
        except GeodeError as exc:  # the loop asks again when it sees the cancel
            log.warning("turn %s: executor cancel failed: %s", turn_id, exc)

    # --- one turn -------------------------------------------------------------------------------------
    def run_turn_held(
        self, run: turns.TurnRun, cancel: threading.Event
    ) -> tuple[turns.TurnResult, list[turns.TurnEvent]]:
        """One turn and its last events, still held (its ``turn.done`` carries them: one frame fewer)."""
        events = self.sink.for_turn()  # sent before the loop waits; the last ones ride turn.done
        try:
            return self._run_turn(run, cancel, events), events.take()
        finally:
            events.close()  # nothing is left unless the turn's thread failed between the two

    def _run_turn(self, run: turns.TurnRun, cancel: threading.Event, events: EventBatch) -> turns.TurnResult:
        try:
            turn = self.compose(run)
            events.quiet = quiet_tools(turn.plan.specs if turn.plan else (), self._hooked())
            provider = self.providers.get(turn.settings.model or None)
            loop = AgenticLoop(
                provider,
                self.tools,
                self.records,
                plan=turn.plan,
                events=events,
                settings=turn.settings,
                prompt=turn.prompt,
                hooks=self.hooks,
            )
            return loop.run_turn(
                run.session_id,
                run.turn_id,
                run.input.text,
                resume=run.resume,
                cancel=cancel,
                settings=turn.settings,
                images=turn_images(run.input),
            )
        except Exception as exc:  # building the pair failed: the turn still ends with a reason
            log.exception("turn %s could not run", run.turn_id)
            return turns.TurnResult(
                termination_reason=turns.TerminationReason.INTERNAL_ERROR,
                error=f"{type(exc).__name__}: {exc}"[:500],
            )

    def _hooked(self) -> Callable[[str], bool] | None:
        """Whether a PreToolUse hook matches a tool (it may answer "ask"; the config's hooks, as the loop
        has them); None: no hook at all."""
        runner = getattr(self.hooks, "runner", None)
        if runner is None:  # hooks it cannot read: any tool may be asked for
            return None if self.hooks is None else (lambda name: True)
        return None if runner.idle else (lambda name: bool(runner.has(HookEvent.PRE_TOOL_USE, name)))

    def compose(self, run: turns.TurnRun) -> ComposedTurn:
        """The turn as geode.sessions composes it, on this worker's config snapshot and current catalogue."""
        return compose_turn(
            run,
            self.settings,
            catalogue=self.plan_factory(),
            rules_dir=self.ctx.home.rules_dir,
            plan_for=partial(self.plan_for, run),
        )

    def plan_for(self, run: turns.TurnRun, catalogue: BoundToolPlan, settings: LoopSettings) -> BoundToolPlan:
        """The turn's plan: the executor's catalogue with the session's allow/deny lists (the one builder).
        A session composed against another catalogue is noted (log, timeline); it gets the current one."""
        return self.plans.for_turn(
            catalogue,
            session_id=run.session_id,
            turn_id=run.turn_id,
            allowed=settings.allowed_tools,
            denied=settings.denied_tools,
            composed=(settings.plan_hash, settings.plan_generation),
            records=self.records,
        )

    def report_done(
        self, run: turns.TurnRun, result: turns.TurnResult, *, events: list[turns.TurnEvent] | None = None
    ) -> None:
        """``turn.done`` with the turn's last ``events`` until lanes acknowledges (:func:`report_done`)."""
        done = turns.TurnDone(
            turn_id=run.turn_id,
            session_id=run.session_id,
            worker=self.name,
            incarnation=self.incarnation,
            result=result,
            events=events or [],
        )
        report_done(self.sink, done, self.membership.stopped)


def build(bus: Bus, ctx: ChildContext) -> LoopWorker:
    """Registry builder (``actors.tree.registry``): the loop worker of child ``loop-N`` (on a worker host
    ``HOST/loop-N``: the bus name, over tcp to main's lanes, store and executor)."""
    from actors.tree.worker_role import WorkerRole

    role = None if ctx.single_process else WorkerRole.from_env()
    address = role.address_towards_main() if role is not None else ""
    capacity = ctx.settings.loop.capacity
    remote = role is not None
    return LoopWorker(bus, ctx, capacity=capacity, name=bus.name, remote=remote, address=address).start()
