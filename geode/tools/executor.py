"""ToolExecutor: scope → middleware → policy → schema → PreToolUse → approval → receipt (with what to observe)
→ locks → dispatch → outcome (geode/tools/outcomes.py) → PostToolUse → commit → reply. Every denial is an
error result without dispatch, and every outcome is on the timeline."""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from geode.config_schema import GeodeConfig
from geode.faults import fault
from geode.hooks.events import HookEvent
from geode.hooks.runner import HookRunner
from geode.records.client import RecordClient
from geode.records.models import Observation
from geode.redaction import redact_text
from geode.tools import timeline as tool_timeline
from geode.tools.always_scope import always_key
from geode.tools.approvals import APPROVAL_TIMEOUT_S, ApprovalChannel, ApprovalGate
from geode.tools.checks import Checks, Denied, Request, correlation
from geode.tools.dispatch import Cooperative, run_with_deadline
from geode.tools.handlers import HandlerEntry, ToolEnv
from geode.tools.locks import KeyedLocks, ResourceKeyError, resource_keys
from geode.tools.middleware import RequestMiddleware
from geode.tools.outcomes import handler_result, is_interrupted
from geode.tools.plan import BoundToolPlan
from geode.tools.plan_cache import PlanCache
from geode.tools.post_tool_use import post_tool_use
from geode.tools.receipts import OMITTED, Receipts, needs_receipt
from geode.tools.result_redaction import ResultRedactor
from geode.tools.schedule_rule import ScheduleRule, check_schedule
from geode.tools.send_rule import SendRule, check_send
from geode.tools.spec import DataClass, EffectClass, ToolCall, ToolContext, ToolResult, ToolSpec
from geode.tools.timeline import ToolTimeline
from geode.tools.tracing import tool_ended, tool_span
from geode.tools.web_hosts import WebHosts

MAX_CANCELLED = 4096
log = logging.getLogger(__name__)


class ToolExecutor:
    """Runs tool calls against bound plans. Thread-safe: the bus serves it from several worker threads.

    ``owner`` is "<child name>#<incarnation>": receipts admitted here die (become uncertain) with it.
    """

    def __init__(
        self,
        *,
        owner: str,
        records: RecordClient | None,
        hooks: HookRunner | None = None,
        approvals: ApprovalChannel | None = None,
        handlers: Mapping[str, HandlerEntry] | None = None,
        middleware: Sequence[RequestMiddleware] = (),
        config: GeodeConfig | None = None,
        services: Mapping[str, Any] | None = None,
        roots: Sequence[str | Path] = (),
        default_workspace: str | Path | None = None,
        locks: KeyedLocks | None = None,
        approval_timeout_s: float = APPROVAL_TIMEOUT_S,
        gate: Any = None,
        send_rule: SendRule | None = None,
        schedule_rule: ScheduleRule | None = None,
    ) -> None:
        if handlers is None:
            from geode.tools.builtin.catalogue import builtin_handlers

            handlers = builtin_handlers()
        self.owner = owner
        self.hooks = hooks
        self.locks = locks or KeyedLocks()
        self.services = dict(services or {})
        self._config = config or GeodeConfig()  # the process's typed snapshot (defaults when None)
        self._handlers = dict(handlers)
        self.plans = PlanCache()
        self._mu = threading.Lock()
        self._inflight: dict[int, tuple[tuple[str, str], threading.Event]] = {}
        self._cancelled: OrderedDict[tuple[str, str], None] = OrderedDict()  # cancelled turns, bounded
        self.receipts = Receipts(records, owner)
        self.timeline = ToolTimeline(records)
        self.approvals = ApprovalGate(approvals, hooks, timeout_s=approval_timeout_s, config=self._config)
        workspace = Path(default_workspace).resolve() if default_workspace else Path.cwd()
        self._checks = Checks(
            self.plans,
            self._handlers,
            tuple(middleware),
            hooks,
            self._config,
            workspace,
            tuple(Path(r).expanduser().resolve() for r in roots),
            gate=gate,
        )
        self.gate = gate  # geode.tools.mcp.gate.McpGate (or None): MCP refusals and first-use approvals
        self.web_hosts = WebHosts(self.services)  # web_fetch asks once per new host in a session
        self.services.setdefault("web_hosts", self.web_hosts)  # and its handler checks every hop
        self.services.setdefault("skills", self._checks.skill_source())  # use_skill: home + trusted projects
        self.redactor = ResultRedactor()  # secrets masked in every result before anything sees it
        self.send_rule = send_rule  # where send_message may post, and how often per turn (the daemon's)
        # where schedule_job may run, its create check and approval text (no bindings, no chat allows it)
        self.schedule_rule = schedule_rule or ScheduleRule((), None, config=self._config, tools=_specs())

    # --- public API ----------------------------------------------------------------------------------
    def bind_plan(self, plan: BoundToolPlan) -> None:
        self.plans.bind(plan)

    def cancel(self, session_id: str, turn_id: str | None = None) -> int:
        """Cancel a turn's (or a whole session's in-flight) calls: pending prompts deny, running handlers see
        ``env.cancel``; later calls of a cancelled *turn* are refused before they start (a session-wide cancel
        does not refuse the session's future turns). Returns how many calls/prompts were touched."""
        with self._mu:
            if turn_id is not None:
                self._cancelled[(session_id, turn_id)] = None
                while len(self._cancelled) > MAX_CANCELLED:
                    self._cancelled.popitem(last=False)
            hit = [
                ev
                for (sess, turn), ev in self._inflight.values()
                if sess == session_id and (turn_id is None or turn == turn_id)
            ]
        for ev in hit:
            ev.set()
        return len(hit) + self.approvals.cancel(session_id, turn_id)

    def in_flight(self) -> int:
        """Handlers currently dispatched (status)."""
        with self._mu:
            return len(self._inflight)

    def reconfigure(
        self,
        *,
        hooks: HookRunner | None = None,
        handlers: Mapping[str, HandlerEntry] | None = None,
        gate: Any = None,
        send_rule: SendRule | None = None,
    ) -> None:
        """`geode reload`: calls that start from now on use these hooks, handlers (and MCP gate) or send rule;
        a call already running keeps what it started with. Arguments left None are unchanged."""
        with self._mu:
            if hooks is not None:
                self.hooks = self._checks.hooks = hooks
                self.approvals.use_hooks(hooks)
            if handlers is not None:
                self._handlers = self._checks.handlers = dict(handlers)
                self.gate = self._checks.gate = gate
            if send_rule is not None:
                self.send_rule = send_rule

    def _is_cancelled(self, ctx: ToolContext) -> bool:
        # no lock: one membership test is atomic under the GIL (``cancel`` inserts under ``_mu``, as before
        # a check either sees the turn cancelled or runs before the cancel, which then finds the call)
        return (ctx.session_id, ctx.turn_id) in self._cancelled

    def shutdown(self) -> None:
        """Deny pending approval prompts, flush the timeline; running handlers finish on their own threads."""
        self.approvals.shutdown()
        self.timeline.close()

    def execute(self, ctx: ToolContext, call: ToolCall) -> ToolResult:
        with tool_span(call) as sp:
            result = self._execute(ctx, call)
            tool_ended(sp, result)
            return result

    def _execute(self, ctx: ToolContext, call: ToolCall) -> ToolResult:
        req = Request(ctx, call)
        try:
            return self._run(req)
        except Denied as d:
            self.timeline.write(
                "tool.denied", ctx, d.call, d.spec, d.result, stage=d.stage, rewrites=req.rewrites
            )
            return d.result
        except Exception as exc:  # a bug in the executor itself: the caller still gets a result
            log.error(
                "executor failed on %s: %s", call.name, redact_text(f"{type(exc).__name__}: {exc}", 500)
            )
            log.debug("executor failure traceback", exc_info=True)
            result = ToolResult.error(
                call,
                f"Executor error: {type(exc).__name__}: {exc}"[:500],
                "executor_error",
                executed=None,
                recoverable=False,
            )
            self.timeline.write("tool.completed", ctx, call, req.spec, result, stage="executor")
            return result

    # --- the pipeline --------------------------------------------------------------------------------
    def _run(self, req: Request) -> ToolResult:
        c = self._checks
        c.scope(req)
        c.run_middleware(req)
        c.policy(req)
        c.schema(req)
        c.pre_tool_use(req)
        check_send(self.send_rule, req)  # send_message: where it may post, how often per turn
        check_schedule(self.schedule_rule, req, c.workspace_for(req))  # schedule_job: where, which job
        spec, call, ctx = req.spec, req.call, req.ctx
        assert spec is not None
        entry = self._handlers.get(spec.handler)
        if entry is None:
            raise req.deny(
                "dispatch", f"Tool '{call.name}' has no handler here ({spec.handler}).", "tool_unavailable"
            )
        workspace = c.workspace_for(req)
        try:
            keys = resource_keys(spec, call.input, ctx, workspace)
        except ResourceKeyError as exc:
            raise req.deny("locks", str(exc), "resource_key_resolution") from None
        if self._is_cancelled(ctx):
            raise req.deny(
                "cancel", "Tool execution cancelled before start.", "tool_cancelled", cancelled=True
            )
        first_use = self.gate is not None and self.gate.asks_first(ctx, spec)  # an MCP server's first use
        asked = c.classify(req)  # a write to a file GEODE executes or loads as instructions: its own class
        shown = f"[{req.approval_class}] " if req.approval_class else ""
        host = self.web_hosts.new_host(ctx, spec, call)  # web_fetch to a host this session has not approved
        verdict = self.web_hosts.earlier(ctx, host) or self.approvals.decide(
            ctx,
            asked,
            # worded only if a hook or a person sees it
            lambda: (
                shown
                + self._detail(spec, call, req.ask_reason, req.approval_detail)
                + self.web_hosts.note(host)
            ),
            forced=req.force_ask or first_use or host is not None,
            scope=always_key(spec.name, call.input),
        )
        verdict = self.web_hosts.settle(ctx, host, verdict)
        if not verdict.granted:
            raise req.deny(
                "approval",
                verdict.message or f"Permission denied for '{call.name}'.",
                "permission_denied",
                approval=verdict.how,
            )
        if self.gate is not None:
            self.gate.granted(ctx, spec)
        receipted = needs_receipt(spec)
        if receipted:
            fault("executor.before_admit")
            observation = observe(entry, spec, call, workspace, c.roots_for(req))
            early = self.receipts.admit(ctx, call, spec, observation=observation)
            if early is not None:
                kind = "tool.replayed" if not early.is_error else "tool.denied"
                self.timeline.write(kind, ctx, call, spec, early, stage="receipt")
                return early
            fault("executor.after_admit")
        deadline = self._deadline(ctx, spec, entry, call)
        started = time.monotonic()
        held = None if self._is_cancelled(ctx) else self.locks.acquire(keys, timeout_s=deadline)
        if held is not None and self._is_cancelled(ctx):  # cancelled while it waited for its locks
            held.release()
            held = None
        if held is None and self._is_cancelled(ctx):
            gone = ToolResult.error(
                call, "Tool execution cancelled before start.", "tool_cancelled", cancelled=True, denied=True
            )
            if receipted:
                gone = self.receipts.commit(ctx, spec, gone)
            self.timeline.write("tool.denied", ctx, call, spec, gone, stage="cancel")
            return gone
        if held is None:
            busy = ToolResult.error(
                call,
                f"Resources of '{call.name}' stayed busy; it was not run.",
                "resource_busy",
                recoverable=True,
                denied=True,
            )
            if receipted:
                busy = self.receipts.commit(ctx, spec, busy)
            self.timeline.write("tool.denied", ctx, call, spec, busy, stage="locks")
            return busy
        hold = not receipted and spec.policy.effect is EffectClass.READ
        env = ToolEnv(
            ctx=ctx,
            workspace=workspace,
            roots=c.roots_for(req, spec),
            deadline_s=max(0.05, deadline - (time.monotonic() - started)),
            # a bounded read-only walk runs on this thread (geode/tools/dispatch.py)
            cancel=Cooperative() if hold and entry.inline else threading.Event(),
            # schedule_job, send_file: which chat
            services={**self.services, "schedule_rule": self.schedule_rule, "send_rule": self.send_rule},
        )
        arguments = tool_timeline.shown(call, spec)  # what both rows show of the arguments, redacted once
        try:
            held_keys = {"locks": list(held.keys)} if held.keys else {}  # the resource locks it runs under
            self.timeline.write(  # a read-only call's rows may wait HOLD_S: one store request for several
                "tool.called",
                ctx,
                call,
                spec,
                hold=hold,
                arguments=arguments,
                approval=verdict.how,
                rewrites=req.rewrites,
                **held_keys,
            )
            self._observe(HookEvent.TOOL_EXEC_STARTED, ctx, call, {})
            with self._mu:
                self._inflight[id(env)] = ((ctx.session_id, ctx.turn_id), env.cancel)
            if self._is_cancelled(ctx):
                env.cancel.set()
            outcome = run_with_deadline(entry, call.input, env, on_exit=held.release)
        except BaseException:
            held.release()  # idempotent; normally the handler thread releases
            raise
        finally:
            with self._mu:
                self._inflight.pop(id(env), None)
        fault("executor.after_handler")
        # a command GEODE stopped after it began (cancel, deadline) is interrupted: a known end, committed
        result, unknown = handler_result(call, outcome, env.deadline_s, receipted)
        result = self.redactor.apply(result)  # before hooks, receipts, the timeline and the model
        if unknown and receipted:
            why = {"timeout": "deadline passed"}.get(outcome.status)
            self.receipts.mark_uncertain(ctx, why or "handler crashed")
        stopped = {"outcome": "interrupted"} if is_interrupted(result) else {}
        result = post_tool_use(self.hooks, ctx, spec, call, result)
        if receipted and not unknown:
            result = self.receipts.commit(ctx, spec, result)
            fault("executor.after_commit")
        self.timeline.write(  # a read-only call's rows go with the rows of the calls around it
            "tool.completed", ctx, call, spec, result, hold=hold, arguments=arguments, **stopped
        )
        self._observe(
            HookEvent.TOOL_EXEC_ENDED,
            ctx,
            call,
            {"has_error": result.is_error, "error_type": result.error_type, "executed": result.executed},
        )
        return result

    def _observe(self, event: HookEvent, ctx: ToolContext, call: ToolCall, extra: dict[str, Any]) -> None:
        """Observation hooks (run off-thread by the HookRunner; they never decide)."""
        if self.hooks is not None and not self.hooks.idle:
            self.hooks.run(event, {"tool_name": call.name, **extra}, correlation(ctx, call))

    # --- pieces --------------------------------------------------------------------------------------
    def _deadline(self, ctx: ToolContext, spec: ToolSpec, entry: HandlerEntry, call: ToolCall) -> float:
        seconds = spec.deadline_s
        if entry.deadline is not None:
            seconds = entry.deadline(call.input)
        if ctx.deadline_ms is not None:
            seconds = min(seconds, max(0.05, (ctx.deadline_ms - time.time() * 1000) / 1000))
        return max(0.05, seconds)

    @staticmethod
    def _detail(spec: ToolSpec, call: ToolCall, why: str = "", worded: str = "") -> str:
        """What the person approves: the whole call, unredacted and uncut (a redacted or cut command hid
        what ran), or the tool rule's ``worded`` text of it (schedule_job). It travels only in the
        transient approval message; personal data shows argument names."""
        note = f" (hook: {why[:200]})" if why else ""
        if worded:
            return worded + note
        if spec.policy.data_class is DataClass.PERSONAL:
            names = ", ".join(sorted(map(str, call.input))) or "none"
            return f"{call.name} (arguments: {names}) {OMITTED}{note}"
        return f"{call.name} {json.dumps(call.input, ensure_ascii=False)}{note}"


def _specs() -> tuple[ToolSpec, ...]:
    from geode.tools.builtin.catalogue import builtin_specs  # the catalogue imports the handlers

    return builtin_specs()


def observe(
    entry: HandlerEntry, spec: ToolSpec, call: ToolCall, workspace: Path, roots: tuple[Path, ...]
) -> Observation | None:
    """What the handler's effect would leave, worked out before it runs (None: not observable). Personal-data
    tools are never observed: their receipts keep no detail of the call."""
    if entry.observe is None or spec.policy.data_class is DataClass.PERSONAL:
        return None
    try:
        return entry.observe(dict(call.input), workspace, roots)
    except Exception as exc:  # looking must never stop the call: it is only settled by a person then
        log.info("no observation for %s: %s", call.name, redact_text(f"{type(exc).__name__}: {exc}", 300))
        return None
