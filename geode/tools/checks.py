"""Pre-dispatch checks in order: scope, request middleware, policy, schema, PreToolUse (then re-checks)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from geode.hooks.events import HookEvent
from geode.hooks.runner import HookRunner
from geode.tools.handlers import HandlerEntry
from geode.tools.loaded_files import own_class, write_class
from geode.tools.middleware import RequestMiddleware
from geode.tools.paths import AllowedRoots, Exclusion, home_exclusion, workspace_of
from geode.tools.plan import BoundToolPlan
from geode.tools.plan_cache import PlanCache
from geode.tools.policy import PolicyDenial, check_monotonic, check_paths, check_runtime_policy
from geode.tools.receipts import OMITTED
from geode.tools.schema_check import SchemaDenial, validate_input
from geode.tools.skill_scope import (
    SkillScope,
    SkillSource,
    reads_files,
    scope_of,
    skill_relative,
    with_skill_roots,
)
from geode.tools.spec import DataClass, ToolCall, ToolContext, ToolResult, ToolSpec

if TYPE_CHECKING:
    from geode.config_schema import GeodeConfig


class Denied(Exception):
    """A check refused the call: ``result`` goes back to the caller, nothing was dispatched."""

    def __init__(self, stage: str, result: ToolResult, call: ToolCall, spec: ToolSpec | None) -> None:
        super().__init__(stage)
        self.stage = stage
        self.result = result
        self.call = call
        self.spec = spec


@dataclass
class Request:
    """The call as it moves through the checks (rewrites replace ``call`` and ``spec``)."""

    ctx: ToolContext
    call: ToolCall
    spec: ToolSpec | None = None
    plan: BoundToolPlan | None = None
    force_ask: bool = False
    ask_reason: str = ""
    approval_class: str = ""  # a write to a file GEODE executes or loads as instructions (loaded_files)
    approval_detail: str = ""  # the whole text a person approves, when a tool's rule words it (schedule_job)
    rewrites: list[str] = field(default_factory=list)  # "<stage>:<old name>-><new name>" (observation)
    # worked out once per call by ``Checks`` (the workspace resolved, the roots, the skills in use)
    workspace: Path | None = None
    roots: AllowedRoots | None = None
    skills: SkillScope | None = None

    def deny(self, stage: str, message: str, error_type: str, **extra: Any) -> Denied:
        extra.setdefault("denied", True)
        extra.setdefault("recoverable", error_type == "invalid_tool_input")
        return Denied(stage, ToolResult.error(self.call, message, error_type, **extra), self.call, self.spec)


@dataclass
class Checks:
    """Shared state the checks need (owned by the executor)."""

    plans: PlanCache
    handlers: Mapping[str, HandlerEntry]
    middleware: Sequence[RequestMiddleware]
    hooks: HookRunner | None
    config: GeodeConfig
    workspace: Path
    roots: tuple[Path, ...]
    # never inside the allowed roots, whatever they are: the GEODE home and its run dir
    excluded: Exclusion = field(default_factory=home_exclusion)
    gate: Any = None  # geode.tools.mcp.gate.McpGate: the MCP overlay's refusals and first-use approvals

    def scope(self, req: Request) -> None:
        ctx = req.ctx
        plan = self.plans.get(ctx.plan_hash, ctx.plan_generation)
        if plan is None:
            raise req.deny(
                "scope",
                f"Tool plan {ctx.plan_hash[:12] or '<none>'} gen {ctx.plan_generation} is not bound here.",
                "plan_not_bound",
            )
        req.plan = plan
        spec = plan.get(req.call.name)
        if spec is None and self.gate is not None and (why := self.gate.unknown_tool(req.call.name)):
            raise req.deny("scope", why.message, "tool_policy_denied", reason=why.reason)
        if spec is None:
            raise req.deny(
                "scope", f"Tool '{req.call.name}' is not available in this session.", "tool_not_in_scope"
            )
        req.spec = spec

    def rewrite(self, req: Request, stage: str, name: str, args: dict[str, Any]) -> None:
        """Adopt a rewritten request: the new tool must be in scope and at least as strictly governed."""
        old = req.spec
        assert old is not None and req.plan is not None
        req.rewrites.append(f"{stage}:{req.call.name}->{name}")
        req.call = ToolCall(id=req.call.id, name=name, input=args)
        new = req.plan.get(name)
        if new is None:
            raise req.deny(stage, f"Tool '{name}' is not available in this session.", "tool_not_in_scope")
        try:
            check_monotonic(old, new)
        except PolicyDenial as exc:
            raise req.deny(stage, exc.message, exc.error_type) from None
        req.spec = new

    def run_middleware(self, req: Request) -> None:
        for mw in self.middleware:
            try:
                out = mw(req.ctx, req.call)
            except Exception as exc:
                raise req.deny(
                    "middleware", f"Request middleware failed: {exc}", "middleware_error"
                ) from None
            if out.name != req.call.name or out.input != req.call.input:
                self.rewrite(req, "middleware", out.name, dict(out.input))

    def policy(self, req: Request) -> None:
        assert req.spec is not None
        entry = self.handlers.get(req.spec.handler)
        if self.gate is not None and (why := self.gate.refusal(req.ctx, req.spec)):  # MCP overlay rules
            raise req.deny("policy", why.message, "tool_policy_denied", reason=why.reason)
        skills = self.skill_scope(req)
        if why_not := skills.refusal(req.spec.name):  # a skill's allowed-tools only narrow
            raise req.deny("policy", why_not, "tool_policy_denied", reason="skill_allowed_tools")
        if entry is not None and entry.path_args and reads_files(req.spec):  # relative to a skill's folder
            req.call = skill_relative(req.call, entry.path_args, self.workspace_for(req), skills)
        try:
            check_runtime_policy(req.ctx, req.spec, self.config)
            if entry is not None and entry.path_args:
                check_paths(
                    req.call.input,
                    entry.path_args,
                    self.workspace_for(req),
                    self.roots_for(req, req.spec),
                )
        except PolicyDenial as exc:
            raise req.deny("policy", exc.message, exc.error_type, reason=exc.reason) from None

    def schema(self, req: Request) -> None:
        assert req.spec is not None
        try:
            validate_input(req.spec.input_schema, req.call.input)
        except SchemaDenial as exc:
            raise req.deny(
                "schema", f"Invalid input for '{req.call.name}': {exc}", "invalid_tool_input"
            ) from None

    def pre_tool_use(self, req: Request) -> None:
        if self.hooks is None or self.hooks.idle:  # no hook: ``run`` would answer an empty outcome
            return
        assert req.spec is not None
        personal = req.spec.policy.data_class is DataClass.PERSONAL
        payload = {"tool_name": req.call.name, "tool_input": {} if personal else dict(req.call.input)}
        if personal:
            payload["tool_input_omitted"] = OMITTED
        out = self.hooks.run(HookEvent.PRE_TOOL_USE, payload, correlation(req.ctx, req.call))
        if out.blocked or out.halt:
            raise req.deny(
                "hook", out.reason or f"Blocked by a PreToolUse hook ({out.decided_by}).", "hook_blocked"
            )
        if out.decision == "ask":
            req.force_ask, req.ask_reason = True, out.reason
        if out.updates:
            name = str(out.updates.get("tool_name", req.call.name))
            given = out.updates.get("tool_input")
            args = {**req.call.input, **given} if isinstance(given, dict) else dict(req.call.input)
            self.rewrite(req, "hook", name, args)
            # the rewritten request goes through scope, policy and schema again
            self.policy(req)
            self.schema(req)

    def classify(self, req: Request) -> ToolSpec:
        """The spec the approval gate decides on: a built-in write to a file GEODE executes or loads into the
        prompt is its own class (``req.approval_class`` names it), asked every time, never "always"."""
        assert req.spec is not None
        entry = self.handlers.get(req.spec.handler)
        if entry is None or not entry.path_args:
            return req.spec
        workspace = self.workspace_for(req)
        args = req.call.input
        req.approval_class = write_class(req.spec, args, entry.path_args, workspace, self.config)
        return own_class(req.spec) if req.approval_class else req.spec

    def workspace_for(self, req: Request) -> Path:
        """The call's workspace, resolved once per call (every check and the handler see the same)."""
        if req.workspace is None:
            req.workspace = workspace_of(req.ctx, self.workspace)
        return req.workspace

    def roots_for(self, req: Request, spec: ToolSpec | None = None) -> AllowedRoots:
        """The allowed roots (default: the session workspace), carrying the exclusion to the handlers; for a
        read-only tool, the folders of the skills in use too (geode/tools/skill_scope.py)."""
        if req.roots is None:
            # both resolved already: the configured roots at start, the workspace in this call
            req.roots = AllowedRoots.resolved(self.roots or (self.workspace_for(req),), self.excluded)
        return with_skill_roots(req.roots, self.skill_scope(req)) if reads_files(spec) else req.roots

    def skill_source(self) -> SkillSource:
        return SkillSource(self.excluded.home, tuple(self.config.trust.projects))

    def skill_scope(self, req: Request) -> SkillScope:
        if req.skills is None:
            req.skills = scope_of(req.ctx, self.skill_source(), self.workspace_for(req))
        return req.skills


def correlation(ctx: ToolContext, call: ToolCall) -> dict[str, Any]:
    return {
        "session_id": ctx.session_id,
        "turn_id": ctx.turn_id,
        "step_id": ctx.step_id,
        "tool_call_id": call.id,
        "operation_id": ctx.operation_id,
        "cwd": ctx.workspace,
        "mode": ctx.mode,
    }
