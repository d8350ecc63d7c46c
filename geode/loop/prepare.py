"""Phase 2, prepare call: plan binding, system prompt, compacted view, StepSnapshot and request."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass

from geode.conversation import Message
from geode.loop.compaction import estimate_tokens, model_view
from geode.loop.guards import wrap_up
from geode.loop.session_hooks import CONTEXT_KEY
from geode.loop.settings import LoopSettings
from geode.loop.skills_in_use import skills_in_use
from geode.loop.snapshot import StepSnapshot
from geode.loop.state import TurnState
from geode.loop.summarize import effective_history
from geode.prompt.builder import build_system_prompt
from geode.prompt.sources import PromptSources
from geode.providers.identity_memo import IdentityMemo
from geode.providers.types import ModelRequest, Provider, ToolSchema
from geode.tools.plan import BoundToolPlan

# plan -> {(allowed, denied, provider): the bound plan, or None for "the plan itself" (never the plan: a value
# holding its own key would keep the memo entry, and so the plan, alive)}
_BOUND: IdentityMemo[dict[tuple[object, ...], BoundToolPlan | None]] = IdentityMemo()


def bind_plan(plan: BoundToolPlan | None, provider: Provider, settings: LoopSettings) -> BoundToolPlan | None:
    """The session plan filtered by the turn's allow/deny lists and projected onto the provider: derived
    (hashed) once per (frozen) plan object and lists, not per turn; the same object every turn."""
    if plan is None:
        return None
    allowed = settings.allowed_tools
    name = getattr(provider, "name", "")
    key = (None if allowed is None else frozenset(allowed), frozenset(settings.denied_tools), name)
    derived = _BOUND.get(plan, _no_derivations)
    hit = derived.get(key, plan)  # (the plan itself: not derived yet)
    if hit is not plan:
        return plan if hit is None else hit
    bound = plan.filtered(allowed=allowed, denied=settings.denied_tools).projected(name)
    if len(derived) >= 16:  # a plan outlives its turns: keep its few distinct turn settings only
        derived.clear()
    derived[key] = None if bound is plan else bound
    return bound


def _no_derivations(plan: BoundToolPlan) -> dict[tuple[object, ...], BoundToolPlan | None]:
    return {}


def budget_hint(state: TurnState, settings: LoopSettings, wrapping_up: bool) -> str:
    if not (settings.time_budget_s or settings.max_rounds or settings.cost_budget_usd):
        return ""
    parts = []
    if settings.time_budget_s:
        parts.append(f"time used {state.elapsed():.0f}s of {settings.time_budget_s:g}s")
    if settings.max_rounds:
        parts.append(f"round {state.guards.round_index + 1} of {settings.max_rounds}")
    if settings.cost_budget_usd:
        parts.append(f"cost ${state.guards.cost_usd:.4f} of ${settings.cost_budget_usd:.4f}")
    text = "; ".join(parts)
    if wrapping_up:
        text += ". The budget is nearly spent: tools are off for this call; give your best final answer now."
    return text


_TOOLS: IdentityMemo[tuple[tuple[ToolSchema, ...], int]] = IdentityMemo()  # plan -> (schemas, JSON chars)


def plan_tools(plan: BoundToolPlan | None) -> tuple[tuple[ToolSchema, ...], int]:
    """The plan's tool schemas and their JSON size, built once per (frozen) plan object, not per round."""
    if plan is None:
        return (), len("[]")
    return _TOOLS.get(plan, _tools_of)


def _tools_of(plan: BoundToolPlan) -> tuple[tuple[ToolSchema, ...], int]:
    tools = plan.tool_schemas()
    return tools, len(json.dumps([t.model_dump() for t in tools]))


@dataclass
class PreparedCall:
    snapshot: StepSnapshot
    request: ModelRequest
    wrapping_up: bool


def prepare_call(
    state: TurnState,
    *,
    provider: Provider,
    plan: BoundToolPlan | None,
    settings: LoopSettings,
    prompt: PromptSources,
    model: str,
    squeeze: int = 0,
    compact: Callable[[int], None] | None = None,
) -> PreparedCall:
    """Build the snapshot and request of the next call. ``squeeze`` halves the context budget per step."""
    wrapping = wrap_up(state, settings)
    hints = {
        "verification_continuation": state.continuation,
        "execution_budget": budget_hint(state, settings, wrapping),
        "session_start_context": str(state.meta.get(CONTEXT_KEY, "")),
    }
    system = build_system_prompt(prompt, model=model, provider=getattr(provider, "name", ""), hints=hints)
    tools, tools_chars = plan_tools(plan)
    overhead = (sum(len(s.text) for s in system) + tools_chars) // 4
    budget = settings.context_window_tokens - settings.output_reserve_tokens - overhead
    budget = max(1000, budget >> squeeze)
    if compact is not None:  # summarizing compaction (geode.loop.compacting); the floor below either way
        compact(budget)
    view: list[Message] = model_view(
        effective_history(state.history),
        budget_tokens=budget,
        keep_recent=max(2, settings.keep_recent_messages >> squeeze),
    )
    state.guards.step_count += 1
    snapshot = StepSnapshot(
        session_id=state.session_id,
        turn_id=state.turn_id,
        step_index=state.guards.step_count,
        round_index=state.guards.round_index,
        model=model,
        provider=getattr(provider, "name", ""),
        adapter=getattr(provider, "adapter", ""),
        plan=None if (wrapping or plan is None) else plan,
        tool_choice="none" if wrapping else "auto",
        verify_attempt=state.guards.verify_attempt,
        mode=settings.mode,
        origin=settings.origin,
        workspace=settings.workspace,
        skip_permissions=settings.skip_permissions,
        granted_tools=settings.granted_tools,
        scope=settings.scope,
        skills=skills_in_use(state.history),
    )
    # built from this process's own validated parts (messages, plan schemas, prompt sections): constructed,
    # not validated again per round (a validation copied every message and tool tuple: ~0.1-0.2 ms a round
    # in a long session), so the request carries the plan's very tuple of schemas (the adapter's cache hits)
    request = ModelRequest.model_construct(
        model=model,
        system=system,
        messages=tuple(view),
        tools=tools,
        tool_choice="none" if wrapping and tools else "auto",
        max_tokens=settings.max_tokens,
        metadata=snapshot.correlation(),
    )
    return PreparedCall(snapshot, request, wrapping)


def context_tokens(state: TurnState) -> int:
    return estimate_tokens(state.history)
