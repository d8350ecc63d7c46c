"""The executor's tool catalogue (built-ins + the MCP overlay) asked over the bus (``tool.catalogue``) and
compiled into plans by :func:`geode.tools.plan.compile_plan`; the built-ins, logged, when it does not answer.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from typing import Any

from pydantic import ValidationError

from geode.protocol import lifecycle
from geode.protocol import tools as m
from geode.protocol.errors import GeodeError
from geode.protocol.transport import Transport
from geode.records.models import TimelineEvent
from geode.tools.plan import CATALOGUE_LINEAGE, BoundToolPlan, PlanError, PlanRegistry, compile_plan
from geode.tools.spec import ToolSpec

log = logging.getLogger(__name__)
EXECUTOR = "executor"
CATALOGUE_TIMEOUT_S = 1.0  # the executor answers in about a millisecond; a dead one costs this once
RETRY_AFTER_S = 10.0  # after no answer, the built-ins without asking for this long (or until it restarts)
MAX_SESSION_PLANS = 128
EXECUTOR_CHANGES = (lifecycle.CHILD_STARTED, lifecycle.CHILD_READY, lifecycle.CHILD_EXITED)
SessionKey = tuple[str, frozenset[str] | None, frozenset[str]]


def builtin_catalogue() -> list[ToolSpec]:
    """The fallback catalogue: the built-in tools only (no MCP server is reachable without the executor)."""
    from geode.tools.builtin.catalogue import builtin_specs

    return list(builtin_specs())


class CataloguePlans:
    """Thread-safe source of plans compiled from the executor's catalogue.

    ``base()`` is the whole catalogue as a plan. With ``cache`` (the loop worker) the catalogue is asked once
    and again only after the executor's incarnation changed (:meth:`on_lifecycle`) or the last answer was the
    fallback; without it (control, once per composed session) it is asked every time. When the executor does
    not answer within ``timeout_s``, the built-ins are used (logged) and it is not asked again for
    ``retry_after_s`` unless a lifecycle event says it started: a dead executor delays one session or turn,
    not each. ``for_session`` applies a session's allow/deny lists, cached by (catalogue hash, lists).
    """

    def __init__(
        self,
        transport: Transport,
        *,
        target: str = EXECUTOR,
        timeout_s: float = CATALOGUE_TIMEOUT_S,
        cache: bool = True,
        who: str = "",
        retry_after_s: float = RETRY_AFTER_S,
        clock: Callable[[], float] = time.monotonic,
        wait: bool = True,
    ) -> None:
        self.transport, self.target, self.timeout_s = transport, target, timeout_s
        self.retry_after_s, self.clock = retry_after_s, clock
        self._down_until = 0.0  # no answer recently: built-ins without asking until then
        self.cache, self.who = cache, who or "plans"
        self.registry = PlanRegistry()
        self.source = ""  # "executor" | "builtin": where the last catalogue came from
        self._base: BoundToolPlan | None = None
        self._stale = True
        self._sessions: OrderedDict[SessionKey, BoundToolPlan] = OrderedDict()
        self._noted: OrderedDict[tuple[str, str], None] = OrderedDict()  # (session, composed hash) logged
        self._lock = threading.Lock()
        self.wait = wait  # False (control): never block a caller; a stale catalogue is asked in background
        self._asking = False  # one ask at a time: concurrent callers use the last plan (or the built-ins)
        self._served = threading.local()  # .source: where the plan base() last returned on a thread came from

    def on_lifecycle(self, topic: str, event: lifecycle.ChildEvent) -> None:
        """A supervisor event: the executor started, became ready or exited → ask for its catalogue again."""
        if topic in EXECUTOR_CHANGES and event.name == self.target:
            self.executor_changed()

    def executor_changed(self) -> None:
        """The executor (re)started or exited: the next plan asks for its catalogue again."""
        with self._lock:
            self._stale, self._down_until = True, 0.0

    def base(self) -> BoundToolPlan:
        """The whole catalogue as a plan. Only one caller asks the executor at a time; the others (and every
        caller when ``wait`` is False) get the last plan, or the built-ins before the first answer."""
        with self._lock:
            if self.cache and not self._stale and self._base is not None:
                self._served.source = self.source
                return self._base
            quiet = self.wait and self.clock() < self._down_until  # a background ask blocks no one
            ask = not quiet and not self._asking
            if ask:
                self._asking = True
            last, last_source = self._base, self.source
        if ask and not self.wait:
            threading.Thread(target=self._ask, name=f"{self.who}-catalogue", daemon=True).start()
        elif ask:
            return self._ask()
        if last is not None:
            self._served.source = last_source
            return last
        return self._install(builtin_catalogue(), "builtin")

    def prefetch(self) -> None:
        """Ask now, in the background (start-up), so the first caller already has the executor's plan."""
        with self._lock:
            if self._asking:
                return
            self._asking = True
        threading.Thread(target=self._ask, name=f"{self.who}-catalogue", daemon=True).start()

    @property
    def from_executor(self) -> bool:
        """Whether the plan :meth:`base` last returned on this thread (else the current plan) is the
        executor's answer, not the built-in fallback: a background ask that lands meanwhile does not change
        the answer for a plan already handed out (a session composed with the built-ins claims no hash)."""
        served = getattr(self._served, "source", None)
        if served is not None:
            return bool(served == "executor")
        with self._lock:
            return self.source == "executor" and self._base is not None

    def _ask(self) -> BoundToolPlan:
        try:
            specs, source = self._fetch()
            return self._install(specs, source)
        finally:
            with self._lock:
                self._asking = False

    def _install(self, specs: list[ToolSpec], source: str) -> BoundToolPlan:
        plan = self.registry.compile(specs, lineage=CATALOGUE_LINEAGE)
        self._served.source = source
        with self._lock:
            changed = self._base is None or self._base.content_hash != plan.content_hash
            self._base, self.source = plan, source
            self._stale = source != "executor"  # after a fallback, the next caller asks again
        if changed:
            mcp = sum(1 for s in plan.specs if s.handler.startswith("mcp:"))
            log.info(
                "%s: tool catalogue from %s: %d tools (%d MCP), plan %s generation %d",
                self.who,
                source,
                len(plan),
                mcp,
                plan.content_hash[:12],
                plan.generation,
            )
        return plan

    def for_session(
        self, base: BoundToolPlan, allowed: Iterable[str] | None, denied: Iterable[str]
    ) -> BoundToolPlan:
        """``base`` with a session's allowlist (None = all) and denylist applied (the one builder)."""
        allow = None if allowed is None else frozenset(allowed)
        key: SessionKey = (base.content_hash, allow, frozenset(denied))
        with self._lock:
            hit = self._sessions.get(key)
            if hit is not None:
                self._sessions.move_to_end(key)
                return hit
        plan = compile_plan(base.specs, allowed=allow, denied=key[2], registry=self.registry)
        with self._lock:
            self._sessions[key] = plan
            while len(self._sessions) > MAX_SESSION_PLANS:
                self._sessions.popitem(last=False)
        return plan

    def for_turn(
        self,
        base: BoundToolPlan,
        *,
        session_id: str,
        turn_id: str,
        allowed: Iterable[str] | None,
        denied: Iterable[str],
        composed: tuple[str, int] = ("", 0),
        records: Any = None,
    ) -> BoundToolPlan:
        """A turn's plan (:meth:`for_session`). When the session was composed with another plan (``composed``
        = its hash and generation: the catalogue changed since), say so once per session in the log and in a
        ``plan.changed`` timeline row per turn (``records.append_timeline``); the turn uses this plan."""
        plan = self.for_session(base, allowed, denied)
        composed_hash, composed_gen = composed
        if not composed_hash or composed_hash == plan.content_hash:
            return plan
        with self._lock:
            first = (session_id, composed_hash) not in self._noted
            self._noted[(session_id, composed_hash)] = None
            while len(self._noted) > MAX_SESSION_PLANS:
                self._noted.popitem(last=False)
        log.log(
            logging.WARNING if first else logging.DEBUG,
            "session %s was composed with plan %s (generation %d); the executor's catalogue is now plan %s "
            "(generation %d): turn %s uses the current one",
            session_id,
            composed_hash[:12],
            composed_gen,
            plan.content_hash[:12],
            plan.generation,
            turn_id,
        )
        if records is not None:
            event = TimelineEvent(
                session_id=session_id,
                event_id=f"plan-changed-{turn_id}",
                kind="plan.changed",
                ts=time.time(),
                payload={
                    "turn_id": turn_id,
                    "composed_hash": composed_hash,
                    "composed_generation": composed_gen,
                    "plan_hash": plan.content_hash,
                    "plan_generation": plan.generation,
                    "tools": list(plan.tool_names),
                },
            )
            threading.Thread(target=_append, args=(records, event), daemon=True).start()
        return plan

    def _fetch(self) -> tuple[list[ToolSpec], str]:
        try:
            query = m.CatalogueQuery()
            reply = self.transport.call(self.target, m.CATALOGUE, query, timeout_s=self.timeout_s)
            specs = m.Catalogue.model_validate(reply).specs
            BoundToolPlan.build(specs)  # a catalogue that cannot be a plan (duplicate names...) is refused
            return specs, "executor"
        except (GeodeError, PlanError, ValidationError) as exc:
            with self._lock:
                self._down_until = self.clock() + self.retry_after_s
            log.warning(
                "%s: the executor's tool catalogue is unavailable (%s); offering the built-in tools only",
                self.who,
                str(exc)[:300],
            )
            return builtin_catalogue(), "builtin"


def _append(records: Any, event: TimelineEvent) -> None:
    """A timeline row off the turn's thread (an observation: a store hiccup never slows the turn)."""
    try:
        records.append_timeline(event)
    except Exception as exc:
        log.warning("timeline row %s for session %s failed: %s", event.kind, event.session_id, exc)
