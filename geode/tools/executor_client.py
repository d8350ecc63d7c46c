"""ExecutorClient: how the loop reaches the executor over any Transport (bind plans, execute calls)."""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Sequence

from geode.protocol import tools as m
from geode.protocol.errors import ErrorCode, GeodeError, Unavailable
from geode.protocol.transport import Transport
from geode.tools.approvals import APPROVAL_TIMEOUT_S
from geode.tools.plan import BoundToolPlan
from geode.tools.receipts import uncertain_result
from geode.tools.spec import EffectClass, ToolCall, ToolContext, ToolResult, ToolSpec

log = logging.getLogger(__name__)
MAX_PLANS = 64
SLACK_S = 15.0


class ExecutorLost(Unavailable):
    """The executor exited with the request in flight: no reply will come, and it may have been handled.

    The shell raises it in the waiting caller (``Bus.fail_pending`` on the supervisor's ``child_exited``);
    the client never re-sends such a call (that would be a replay on the next incarnation)."""


class ExecutorClient:
    """Thread-safe. Remembers the plans it bound (bounded) so it can re-bind after an executor restart.

    A transport failure other than a timeout is retried once; the operation id makes that safe (a call
    whose receipt was admitted before the failure comes back as ``effect_outcome_uncertain``; a read tool
    simply runs again). A timeout is not retried (the first request may still await approval or run), nor
    is :class:`ExecutorLost`: an effectful call becomes ``effect_outcome_uncertain`` at once.
    """

    def __init__(
        self, transport: Transport, target: str = "executor", *, bind_timeout_s: float = 10.0
    ) -> None:
        self.transport = transport
        self.target = target
        self.bind_timeout_s = bind_timeout_s
        self._plans: OrderedDict[tuple[str, int], BoundToolPlan] = OrderedDict()
        self._bound: set[tuple[str, int]] = set()  # keys of _plans bound at the executor as far as we know
        self._lock = threading.Lock()

    def bind_plan(self, plan: BoundToolPlan, *, again: bool = False) -> None:
        """Bind ``plan`` at the executor. A plan this client bound there already is not sent again (a
        turn's bind costs no round trip after the session's first); ``again`` sends it anyway (the executor
        answered ``plan_not_bound``: it restarted or evicted it). :meth:`forget_bound` after an executor
        exit makes the next bind of every plan go out."""
        key = (plan.content_hash, plan.generation)
        with self._lock:
            known = key in self._bound and not again
        if not known:
            self.transport.call(self.target, m.PLAN_BIND, plan.to_wire(), timeout_s=self.bind_timeout_s)
        with self._lock:
            self._plans[key] = plan
            self._plans.move_to_end(key)
            self._bound.add(key)
            while len(self._plans) > MAX_PLANS:
                self._bound.discard(self._plans.popitem(last=False)[0])

    def forget_bound(self) -> None:
        """The executor exited: its next incarnation has no plans, so every plan is bound again."""
        with self._lock:
            self._bound.clear()

    def execute(self, ctx: ToolContext, call: ToolCall) -> ToolResult:
        body = m.ToolExecute(ctx=ctx, call=call)
        timeout = self._timeout(ctx, [call])
        return self._with_rebind(
            ctx,
            lambda: ToolResult.model_validate(
                self.transport.call(self.target, m.EXECUTE, body, session=ctx.session_id, timeout_s=timeout)
            ),
            call,
        )

    def catalogue(self) -> list[ToolSpec]:
        """The specs the executor can run (built-ins + connected MCP servers), to compile plans from."""
        reply = self.transport.call(self.target, m.CATALOGUE, {}, timeout_s=self.bind_timeout_s)
        return m.Catalogue.model_validate(reply).specs

    def cancel(self, session_id: str, turn_id: str | None = None, *, timeout_s: float = 3.0) -> int:
        """Cancel a turn's calls in the executor (running handlers see ``env.cancel``: a run_bash group is
        killed at once; later calls of the turn are refused); returns how many calls/prompts it touched."""
        body = m.ToolCancel(session_id=session_id, turn_id=turn_id or "")
        reply = self.transport.call(self.target, m.CANCEL, body, session=session_id, timeout_s=timeout_s)
        return m.ToolCancelled.model_validate(reply).touched

    # --- internals -----------------------------------------------------------------------------------
    def _with_rebind(self, ctx: ToolContext, send, call: ToolCall) -> ToolResult:  # type: ignore[no-untyped-def]
        for attempt in range(2):
            try:
                result = send()
            except ExecutorLost as exc:
                log.warning("executor lost during %s (%s): outcome unknown", call.name, ctx.operation_id)
                log.debug("executor lost: %s", exc)
                return self._lost(ctx, call)
            except GeodeError as exc:
                log.warning(
                    "executor call for %s failed (%s); attempt %d", call.name, exc.code.value, attempt + 1
                )
                if attempt == 1 or exc.code is ErrorCode.TIMEOUT:
                    return _unreachable(call, exc)
                continue
            if result.error_type == "plan_not_bound" and attempt == 0 and self._rebind(ctx):
                continue
            return result
        raise AssertionError("unreachable")

    def _lost(self, ctx: ToolContext, call: ToolCall) -> ToolResult:
        """The executor died with this call in flight: never re-sent; its receipt (if any) is uncertain."""
        with self._lock:
            plan = self._plans.get((ctx.plan_hash, ctx.plan_generation))
        spec = plan.get(call.name) if plan is not None else None
        if spec is not None and spec.policy.effect is EffectClass.READ:
            return ToolResult.error(
                call,
                f"The tool executor restarted while '{call.name}' ran; it changes nothing, so you may call "
                "it again.",
                "executor_restarted",
                executed=None,
                recoverable=True,
            )
        result = uncertain_result(call, "the tool executor stopped while it ran")
        assert isinstance(result.content, dict)
        return result.model_copy(update={"content": {**result.content, "operation_id": ctx.operation_id}})

    def _rebind(self, ctx: ToolContext) -> bool:
        with self._lock:
            plan = self._plans.get((ctx.plan_hash, ctx.plan_generation))
        if plan is None:
            return False
        try:
            self.bind_plan(plan, again=True)
        except GeodeError:
            return False
        return True

    def _timeout(self, ctx: ToolContext, calls: Sequence[ToolCall]) -> float:
        with self._lock:
            plan = self._plans.get((ctx.plan_hash, ctx.plan_generation))
        longest = 0.0
        for c in calls:
            spec = plan.get(c.name) if plan is not None else None
            longest = max(longest, spec.deadline_s if spec is not None else 600.0)
        return longest + APPROVAL_TIMEOUT_S + SLACK_S


def _unreachable(call: ToolCall, exc: GeodeError) -> ToolResult:
    return ToolResult.error(
        call,
        f"The tool executor is unreachable ({exc.code.value}); the outcome of '{call.name}' is unknown.",
        "executor_unavailable",
        executed=None,
        outcome_uncertain=True,
        recoverable=False,
    )
