"""The ``scheduler`` child (daemon tree only): runs the scheduler driver (:mod:`geode.schedule.driver`) on
its own thread against the real clock (a test's fake one with ``GEODE_FAKE_CLOCK``:
:mod:`geode.schedule.clock`), as holder ``scheduler#<incarnation>:<pid>`` (the store releases a
dead incarnation's leases), and serves ``schedule.*`` (:mod:`geode.protocol.schedule`): it is the single
logical writer of job definitions, through the store's ledger requests. It never runs a turn: each
occurrence is an AUTOMATION turn submitted to lanes (:mod:`geode.schedule.bus_ports`); a job's reply goes
to its chat through the executor's receipted ``messenger.deliver``.

Declarative jobs (``[[schedule.jobs]]``) are applied at start and by ``geode reload`` (``apply_config``):
added, changed (occurrences already due keep their course) or removed; the ledger stays.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from datetime import datetime
from typing import TYPE_CHECKING, Any

from actors.bus import Bus
from geode.config_reload import SCHEDULE, ConfigChange
from geode.home_secrets import session_id_key
from geode.lanes.stream import each_event
from geode.messengers.config import canonical_destination
from geode.protocol import lanes as lanes_msg
from geode.protocol import lifecycle, runtime
from geode.protocol import schedule as m
from geode.protocol.dispatch import Dispatch
from geode.protocol.errors import BadRequest, GeodeError, NotFound, Unavailable
from geode.protocol.transport import Request
from geode.records.schedule_client import LedgerClient
from geode.records.schedule_models import JobEntry, Runs
from geode.records.store_client import StoreClient
from geode.schedule.bus_ports import BusChat, BusTurns
from geode.schedule.clock import scheduler_clock
from geode.schedule.definitions import JobState
from geode.schedule.driver import Driver
from geode.schedule.heartbeat import declared_jobs, read_prompt
from geode.schedule.jobs import JobError, JobSpec, check_new, parse_job
from geode.schedule.planner import plan
from geode.sessions.automation import job_turn_settings, job_workspace, model_denied
from geode.tools.catalogue_plans import CataloguePlans

if TYPE_CHECKING:
    from actors.tree.config_sections import TreeSettings
    from actors.tree.registry import ChildContext

log = logging.getLogger(__name__)
TICK_S = 0.5  # how often the driver looks (an every-1s job fires within this of its instant)


class SchedulerProcess:
    """The driver, its thread, and the ``schedule.*`` handlers (one lock: the driver is not thread-safe)."""

    def __init__(
        self, ctx: ChildContext, bus: Bus, driver: Driver, plans: CataloguePlans, fake_clock: str = ""
    ) -> None:
        self.ctx, self.bus, self.driver, self.plans = ctx, bus, driver, plans
        self.fake_clock = fake_clock  # the fake clock's file (tests only), "" on the real clock
        self.ticked_at: datetime | None = None  # the clock at the start of the last completed tick
        self.lock = threading.RLock()
        self.wake = threading.Event()
        self.stopping = threading.Event()
        self.ready = False
        self.started = time.monotonic()
        self.last_error = ""
        self.thread = threading.Thread(target=self._run, name="scheduler", daemon=True)

    # --- the loop ---------------------------------------------------------------------------------------
    def start(self) -> None:
        self.thread.start()

    def _run(self) -> None:
        while not self.stopping.is_set():
            try:
                with self.lock:
                    if not self.ready:
                        self.driver.start()
                        self.apply_declared(declared_jobs(self.ctx.settings.schedule))
                        self.ready = True
                        log.info(
                            "scheduler ready: %d jobs, %d open",
                            len(self.driver.jobs),
                            len(self.driver.following),
                        )
                    at = self.driver.now()
                    self.driver.tick()
                    self.ticked_at = at
                self.last_error = ""
            except GeodeError as exc:  # the store or lanes restarting: the ledger is unchanged, try again
                self.last_error = exc.message[:500]
                log.info("scheduler: %s", exc.message)
            except Exception as exc:  # never let the loop die silently: say it, keep going
                self.last_error = f"{type(exc).__name__}: {exc}"[:500]
                log.exception("scheduler tick failed")
            self.wake.wait(TICK_S)
            self.wake.clear()

    def stop(self) -> None:
        self.stopping.set()
        self.wake.set()
        self.thread.join(timeout=5.0)

    # --- declarative jobs ---------------------------------------------------------------------------------
    def apply_declared(self, specs: list[JobSpec]) -> list[str]:
        """Make the stored declarative jobs the config's: add, change, remove (the ledger stays)."""
        d, done = self.driver, []
        wanted = {s.name: s for s in specs}
        for name, held in list(d.jobs.items()):
            if held.declarative and name not in wanted:
                d.remove(name)
                done.append(f"{name} removed")
        for spec in specs:
            state = d.jobs.get(spec.name)
            if state is not None and state.declarative and _same(state, spec):
                continue
            if state is None:
                try:
                    check_new(spec, d.now())
                except JobError as exc:
                    log.warning("scheduler: %s (not added)", exc.message)
                    continue
            d.define(spec, declarative=True)
            done.append(f"{spec.name} {'added' if state is None else 'changed'}")
        return done

    def apply_config(self, change: ConfigChange, settings: TreeSettings) -> list[str]:
        """`geode reload` (actors/tree/reload_rule.py): the new ``[schedule]`` grace and jobs."""
        if SCHEDULE not in change.areas:
            return []
        with self.lock:
            self.driver.grace_s = settings.schedule.grace_s
            done = self.apply_declared(declared_jobs(settings.schedule)) if self.ready else []
        self.wake.set()
        return [f"scheduler: jobs {', '.join(done) if done else 'unchanged'}"]

    # --- schedule.* ---------------------------------------------------------------------------------------
    def dispatch(self) -> Dispatch:
        return Dispatch(
            self.ctx.name,
            {
                runtime.PING: lambda b, r: runtime.Pong(
                    name=self.ctx.name, incarnation=self.ctx.incarnation, pid=os.getpid()
                ),
                runtime.STATUS: self._status,
                runtime.CHILD_DIED: lambda b, r: runtime.Ack(),
                m.ADD: self._add,
                m.LIST: self._list,
                m.SHOW: self._show,
                m.REMOVE: self._remove,
                m.PAUSE: lambda b, r: self._state(b.name, True),
                m.RESUME: lambda b, r: self._state(b.name, False),
                m.RUN_NOW: self._run_now,
                m.RUNS: self._runs,
                lanes_msg.ORIGIN_EVENT: self._origin_event,
                lanes_msg.ORIGIN_EVENTS: each_event(self._origin_event),
            },
        )

    def _status(self, b: runtime.StatusQuery, r: Request) -> runtime.StatusReply:
        detail = {
            "ready": self.ready,
            "holder": self.driver.holder,
            "jobs": len(self.driver.jobs),
            "following": len(self.driver.following),
            "last_error": self.last_error,
            "clock": f"FAKE ({self.fake_clock})" if self.fake_clock else "real",
            "ticked_at": self.ticked_at.isoformat() if self.ticked_at is not None else None,
            "uptime_s": round(time.monotonic() - self.started, 3),
        }
        return runtime.StatusReply(
            name=self.ctx.name, incarnation=self.ctx.incarnation, pid=os.getpid(), detail=detail
        )

    def _origin_event(self, b: lanes_msg.StreamEvent, r: Request) -> None:
        if b.kind == lanes_msg.TURN_DONE:
            self.wake.set()  # look now rather than at the next tick

    def _ready(self) -> None:
        if not self.ready:
            raise Unavailable(
                f"the scheduler is starting ({self.last_error or 'loading the ledger'}); try again"
            )

    def _job(self, name: str) -> JobState:
        state = self.driver.jobs.get(name)
        if state is None:
            raise NotFound(f"no scheduled job named {name!r} (geode schedule list shows them)")
        return state

    def _view(self, state: JobState) -> m.JobView:
        d = self.driver
        cursor = state.cursor
        nxt = None
        if not (cursor.paused or cursor.disabled or state.job.paused):
            lower = max(t for t in (state.job.created_at, cursor.last_instant, state.bound) if t is not None)
            wake = plan(state.job, lower, d.now(), grace_s=d.grace_s).wake_at
            nxt = wake.isoformat() if wake is not None else None
        entry = JobEntry(job=state.record, cursor=cursor)
        return m.JobView(entry=entry, next_instant=nxt, declarative=state.declarative)

    def _add(self, b: m.AddJob, r: Request) -> m.AddReply:
        self._ready()
        data: dict[str, Any] = {**b.job, "origin": b.origin}
        if b.origin == "model" and b.workspace is not None:
            data["workspace"] = b.workspace
        spec = parse_job(data)
        with self.lock:
            old = self.driver.jobs.get(spec.name)
            if old is not None and old.declarative:
                raise BadRequest(f"schedule job {spec.name!r} is defined in config.toml: change it there")
            if old is not None and not b.replace:
                raise BadRequest(f"schedule job {spec.name!r} exists: remove it first (or replace it)")
            settings = self.ctx.settings
            bound = {
                canonical_destination(f"{x.platform}:{x.channel_id}") for x in settings.messengers.bindings
            }
            denied = model_denied(settings, tuple(getattr(self.plans.base(), "specs", ()) or ()))
            check_new(spec, self.driver.now(), bound_chats=bound, model_denied=denied)
            state = self.driver.define(spec, declarative=False)
            view = self._view(state)
        self.wake.set()
        return m.AddReply(job=view)

    def _list(self, b: m.ListJobs, r: Request) -> m.JobsReply:
        self._ready()
        with self.lock:
            return m.JobsReply(jobs=[self._view(s) for _, s in sorted(self.driver.jobs.items())])

    def _show(self, b: m.ShowJob, r: Request) -> m.ShowReply:
        self._ready()
        with self.lock:
            view = self._view(self._job(b.name))
        return m.ShowReply(job=view, runs=self.driver.ledger.runs(b.name, limit=b.limit))

    def _remove(self, b: m.RemoveJob, r: Request) -> m.RemoveReply:
        self._ready()
        with self.lock:
            if self._job(b.name).declarative:
                raise BadRequest(
                    f"schedule job {b.name!r} is defined in config.toml: remove it there, then geode reload"
                )
            return m.RemoveReply(removed=self.driver.remove(b.name))

    def _state(self, name: str, paused: bool) -> m.StateReply:
        self._ready()
        with self.lock:
            self._job(name)
            state = self.driver.set_paused(name, paused)
            view = self._view(state)
        self.wake.set()
        return m.StateReply(job=view)

    def _run_now(self, b: m.RunNow, r: Request) -> m.RunNowReply:
        self._ready()
        with self.lock:
            self._job(b.name)
            row, duplicate = self.driver.run_now(b.name, b.request_id)
        self.wake.set()
        return m.RunNowReply(occurrence=row, duplicate=duplicate)

    def _runs(self, b: m.ListRuns, r: Request) -> Runs:
        return self.driver.ledger.runs(b.name, limit=b.limit)


def _same(state: JobState, spec: JobSpec) -> bool:
    """The stored job is ``spec`` (the anchor aside)."""
    return JobSpec.model_validate(state.job.model_dump(exclude={"created_at"})) == spec


def build(bus: Bus, ctx: ChildContext) -> SchedulerProcess:
    """Registry builder (``actors.tree.registry``): serve ``scheduler``, then start the driver's thread."""
    proc = assemble(bus, ctx, f"scheduler#{ctx.incarnation}:{os.getpid()}")
    bus.serve(ctx.name, proc.dispatch())
    on_event = proc._origin_event
    stream = Dispatch(
        f"{ctx.name} (lanes peer)",
        {lanes_msg.ORIGIN_EVENT: on_event, lanes_msg.ORIGIN_EVENTS: each_event(on_event)},
    )
    bus.connect_peer("lanes", stream, concurrency=1)
    proc.start()
    return proc


def assemble(bus: Bus, ctx: ChildContext, holder: str) -> SchedulerProcess:
    """The scheduler over ``bus`` as ``holder``, not serving, not started (a test runs a second one)."""
    settings = ctx.settings
    ledger = LedgerClient(bus.transport, attempts=3)
    plans = CataloguePlans(bus.transport, wait=False, who=ctx.name, cache=False)
    bus.subscribe("supervisor", lifecycle.on_child_events(plans.on_lifecycle))
    plans.prefetch()

    def turn_settings(job: Any, occurrence: str) -> dict[str, Any]:
        return job_turn_settings(
            job, occurrence=occurrence, config=ctx.source.snapshot, home=ctx.home, plans=plans
        )

    store = StoreClient(bus.transport, attempts=3)
    turns = BusTurns(bus.transport, store, turn_settings)
    chat = BusChat(bus.transport, session_id_key(ctx.home), store)

    def heartbeat(job: Any) -> str | None:  # [schedule.heartbeat]: its prompt is its workspace's HEARTBEAT.md
        return read_prompt(job_workspace(job, ctx.home))

    clock, fake = scheduler_clock(ctx.home.root)
    driver = Driver(
        ledger, turns, chat, clock, holder, grace_s=settings.schedule.grace_s, heartbeat=heartbeat
    )
    return SchedulerProcess(ctx, bus, driver, plans, str(fake or ""))
