"""Main's executor as the tool routing: registers remote executors, forwards a session's calls to the one
whose roots hold its workspace (placement.py), and turns a lost host's admitted effects uncertain at once."""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from geode.protocol import runtime as rt
from geode.protocol import tools as m
from geode.protocol.dispatch import Dispatch, Handler
from geode.protocol.envelope import now_ms
from geode.protocol.errors import GeodeError, RequestTimeout, Unavailable
from geode.protocol.transport import Request, Transport
from geode.tools.executor import ToolExecutor
from geode.tools.placement import HEARTBEAT_S, Placement, RemoteExecutor
from geode.tools.receipts import uncertain_result
from geode.tools.remote_receipts import ReceiptRecords, settle_after
from geode.tools.service import bounded
from geode.tools.spec import EffectClass, ToolCall, ToolContext, ToolResult

log = logging.getLogger(__name__)
MARGIN_S = 2.0  # a forwarded call gives up this long before its caller does, so the caller hears why
DEFAULT_TIMEOUT_S = 600.0
MAX_BOUND = 64  # plan keys remembered per remote incarnation


class RemoteExecutorLost(Unavailable):
    """The remote executor's host stopped heartbeating with this call in flight: its outcome is unknown."""


FailPending = Callable[[str, GeodeError], int]


class InlineTypes:
    """A Service whose ``inline_types`` the bus answers on its own thread (cheap, never waiting): the
    routing's heartbeats and registrations never queue behind the tool calls that fill the handler pool."""

    def __init__(self, dispatch: Dispatch, inline: tuple[str, ...]) -> None:
        self.dispatch = dispatch
        self.inline_types = frozenset(inline) & dispatch.types

    def handle(self, request: Request) -> Any:
        return self.dispatch.handle(request)


class RemoteRouter:
    """Thread-safe. ``fail_pending(peer, error)`` fails the requests in flight to a bus peer (``Bus``)."""

    def __init__(
        self,
        executor: ToolExecutor,
        transport: Transport,
        *,
        fail_pending: FailPending,
        placement: Placement | None = None,
        clock: Callable[[], float] = time.monotonic,
        store: str = "store",
        memory: Path | None = None,
        records: ReceiptRecords | None = None,
    ) -> None:
        """``memory``: a file that keeps the table across a restart of this process (run dir), so a session
        under a remote's roots never runs here in the moment before that remote is heard from again.
        ``records``: the store, swept once after start for receipts of remote incarnations it forgot."""
        self.executor = executor
        self.transport = transport
        self.placement = placement or Placement()
        self._fail_pending = fail_pending
        self._clock = clock
        self._store = store
        self._bound: dict[str, set[tuple[str, int]]] = {}  # peer → plan keys bound there
        self._mu = threading.Lock()
        self._stop = threading.Event()
        self._monitor: threading.Thread | None = None
        self._memory = memory
        self._records = records
        if memory is not None:
            self.placement.restore(_recall(memory), self._clock())

    # --- the service ---------------------------------------------------------------------------------
    def routes(self) -> dict[str, Handler]:
        return {
            m.EXECUTE: self.execute,
            m.CANCEL: self.cancel,
            m.EXECUTOR_READY: self.ready,
            m.EXECUTOR_HEARTBEAT: self.heartbeat,
            m.HOSTS: self.hosts,
        }

    INLINE = (m.EXECUTOR_READY, m.EXECUTOR_HEARTBEAT, m.HOSTS)  # cheap: never queued behind tool calls

    def execute(self, b: m.ToolExecute, r: Request) -> ToolResult:
        route = self.placement.route(b.ctx.workspace)
        if route.kind == "local" or route.remote is None:
            return bounded(self.executor.execute(b.ctx, b.call))
        rx = route.remote
        if route.kind == "down":
            return ToolResult.error(
                b.call,
                f"The executor host {rx.host} serving {route.root} is not connected; '{b.call.name}' was "
                "not run. Try again once the host is back.",
                "executor_host_down",
                executed=False,
                recoverable=True,
            )
        return self._forward(rx, b.ctx, b.call, _timeout(r))

    def cancel(self, b: m.ToolCancel, r: Request) -> m.ToolCancelled:
        touched = self.executor.cancel(b.session_id, b.turn_id or None)
        for rx in self.placement.live():
            try:
                reply = self.transport.call(rx.peer, m.CANCEL, b, session=b.session_id, timeout_s=2.0)
                touched += m.ToolCancelled.model_validate(reply).touched
            except GeodeError as exc:
                log.info("cancel on %s#%d failed: %s", rx.owner_name, rx.incarnation, exc)
        return m.ToolCancelled(touched=touched)

    def ready(self, b: m.ExecutorReady, r: Request) -> m.ExecutorKnown:
        """Inline (bus thread): record it; a replaced incarnation is declared lost off this thread."""
        try:
            old = self.placement.register(
                host=b.host,
                name=b.name,
                incarnation=b.incarnation,
                roots=b.roots,
                peer=r.sender,
                now=self._clock(),
                address=b.address,
            )
        except ValueError as exc:
            log.warning("executor.ready from %s refused: %s", r.sender, exc)
            return m.ExecutorKnown(known=False)
        log.info("remote executor %s/%s#%d registered (roots %s)", b.host, b.name, b.incarnation, b.roots)
        self._remember()
        if old is not None:
            why = f"replaced by incarnation {b.incarnation}"
            threading.Thread(target=self._declare_lost, args=(old, why), daemon=True).start()
        return self._known(True)

    def heartbeat(self, b: m.ExecutorHeartbeat, r: Request) -> m.ExecutorKnown:
        return self._known(self.placement.heartbeat(b.host, b.name, b.incarnation, self._clock()))

    def hosts(self, b: m.HostsQuery, r: Request) -> m.Hosts:
        now = self._clock()
        rows = [
            m.HostRow(
                host=rx.host,
                address=rx.address,
                name=rx.name,
                incarnation=rx.incarnation,
                state="up" if rx.up else "lost",
                last_seen_s=round(max(0.0, now - rx.last_seen), 3),
                effects_in_flight=rx.in_flight,
                roots=list(rx.roots),
            )
            for rx in self.placement.all()
        ]
        return m.Hosts(hosts=rows)

    def _known(self, known: bool) -> m.ExecutorKnown:
        return m.ExecutorKnown(known=known, heartbeat_s=HEARTBEAT_S, liveness_s=self.placement.liveness_s)

    # --- liveness ------------------------------------------------------------------------------------
    def start(self, interval_s: float = 0.25) -> RemoteRouter:
        self._monitor = threading.Thread(
            target=self._watch, args=(interval_s,), name="remote-executors", daemon=True
        )
        self._monitor.start()
        if self._records is not None:  # after the window in which a remote it still knows heartbeats again
            settle_after(self._records, self._is_live, self.placement.liveness_s + 1.0, self._stop)
        return self

    def _is_live(self, owner_name: str, incarnation: int) -> bool:
        live = self.placement.live()
        return any(rx.owner_name == owner_name and rx.incarnation == incarnation for rx in live)

    def stop(self) -> None:
        self._stop.set()
        if self._monitor is not None:
            self._monitor.join(timeout=1.0)

    def _watch(self, interval_s: float) -> None:
        while not self._stop.wait(interval_s):
            self.check()

    def check(self) -> list[RemoteExecutor]:
        """Declare the remote executors silent past their liveness window lost (returns them)."""
        lost = self.placement.expire(self._clock())
        if lost:
            self._remember()
        why = f"no heartbeat for {self.placement.liveness_s:g}s"
        for rx in lost:  # each on its own thread: a store that does not answer delays no other host
            threading.Thread(target=self._declare_lost, args=(rx, why), daemon=True).start()
        return lost

    def _declare_lost(self, rx: RemoteExecutor, why: str) -> None:
        """Like a dead child: its calls in flight fail now (their effects unknown, never re-sent) and the
        store marks its incarnation's admitted receipts uncertain (``runtime.child_died``, retried)."""
        who = f"{rx.owner_name}#{rx.incarnation}"
        log.warning("remote executor %s (peer %s) lost: %s", who, rx.peer, why)
        with self._mu:
            self._bound.pop(rx.peer, None)
        try:
            err = RemoteExecutorLost(f"{who} lost ({why}) with this call in flight")
            n = self._fail_pending(rx.peer, err)
            if n:
                log.warning("%s: %d forwarded call(s) failed as outcome unknown", who, n)
        except GeodeError as exc:
            log.info("could not fail the calls in flight to %s: %s", who, exc)
        died = rt.ChildDied(name=rx.owner_name, incarnation=rx.incarnation, reason=why[:512])
        backoff = 0.05
        while not self._stop.is_set():
            try:
                self.transport.call(self._store, rt.CHILD_DIED, died, timeout_s=1.0)
                return
            except (RequestTimeout, Unavailable) as exc:
                log.info("child_died %s → store: %s; retrying", who, exc)
            except Exception as exc:  # refused, or this process is stopping: say so, never raise on a thread
                log.warning("child_died %s not taken by the store: %s", who, exc)
                return
            self._stop.wait(backoff)
            backoff = min(0.5, backoff * 2)

    def _remember(self) -> None:
        if self._memory is None:
            return
        rows = [{**asdict(rx), "roots": list(rx.roots), "in_flight": 0} for rx in self.placement.all()]
        tmp = self._memory.with_suffix(".tmp")
        try:
            tmp.write_text(json.dumps(rows))
            os.replace(tmp, self._memory)
        except OSError as exc:  # observation only: the table still lives in memory
            log.warning("cannot keep the remote executors in %s: %s", self._memory, exc)

    # --- forwarding ----------------------------------------------------------------------------------
    def _forward(self, rx: RemoteExecutor, ctx: ToolContext, call: ToolCall, timeout_s: float) -> ToolResult:
        self.placement.started(rx)
        try:
            for attempt in range(2):
                self._ensure_bound(rx, ctx, force=attempt > 0)
                body = m.ToolExecute(ctx=ctx, call=call)
                reply = self.transport.call(
                    rx.peer, m.EXECUTE, body, session=ctx.session_id, timeout_s=timeout_s
                )
                result = ToolResult.model_validate(reply)
                if result.error_type != "plan_not_bound" or attempt == 1:  # refused before admission
                    return result
            raise AssertionError("unreachable")
        except RemoteExecutorLost as exc:
            log.warning("%s: %s", call.name, exc.message)
            return self._lost(ctx, call, f"the executor host {rx.host} was lost while it ran")
        except RequestTimeout:
            return self._lost(ctx, call, f"no answer from the executor host {rx.host} in time")
        except GeodeError as exc:  # refused or never sent (overloaded, unreachable, bad request): not begun
            return ToolResult.error(
                call,
                f"The executor host {rx.host} did not take '{call.name}' ({exc.code.value}); it was not run.",
                "executor_host_down",
                executed=False,
                recoverable=True,
            )
        finally:
            self.placement.finished(rx)

    def _ensure_bound(self, rx: RemoteExecutor, ctx: ToolContext, *, force: bool) -> None:
        key = (ctx.plan_hash, ctx.plan_generation)
        with self._mu:
            if not force and key in self._bound.get(rx.peer, ()):
                return
        plan = self.executor.plans.get(*key)
        if plan is None:  # the remote answers plan_not_bound; the loop re-binds here and calls again
            return
        self.transport.call(rx.peer, m.PLAN_BIND, plan.to_wire(), timeout_s=10.0)
        with self._mu:
            keys = self._bound.setdefault(rx.peer, set())
            if len(keys) >= MAX_BOUND:
                keys.clear()
            keys.add(key)

    def _lost(self, ctx: ToolContext, call: ToolCall, why: str) -> ToolResult:
        """Outcome unknown: a read tool may simply be called again; an effect is uncertain (never re-sent)."""
        plan = self.executor.plans.get(ctx.plan_hash, ctx.plan_generation)
        spec = plan.get(call.name) if plan is not None else None
        if spec is not None and spec.policy.effect is EffectClass.READ:
            return ToolResult.error(
                call,
                f"{why}; '{call.name}' changes nothing, so you may call it again.",
                "executor_restarted",
                executed=None,
                recoverable=True,
            )
        result = uncertain_result(call, why)
        content: dict[str, Any] = dict(result.content) if isinstance(result.content, dict) else {}
        return result.model_copy(update={"content": {**content, "operation_id": ctx.operation_id}})


def _timeout(r: Request) -> float:
    deadline = r.envelope.deadline
    if deadline is None:
        return DEFAULT_TIMEOUT_S
    return max(1.0, (deadline - now_ms()) / 1000 - MARGIN_S)


def _recall(memory: Path) -> list[RemoteExecutor]:
    """The table a previous incarnation of this process kept (none, or unreadable: an empty one)."""
    try:
        rows = json.loads(memory.read_text())
        return [RemoteExecutor(**{**row, "roots": tuple(row["roots"])}) for row in rows]
    except FileNotFoundError:
        return []
    except (OSError, ValueError, TypeError, KeyError) as exc:
        log.warning("ignoring the remote executors kept in %s: %s", memory, exc)
        return []
