"""Round-entry budget guards and the progress guards (repeated identical errors / successes)."""

from __future__ import annotations

import hashlib
import json

from geode.loop.settings import LoopSettings
from geode.loop.state import Terminal, TurnState
from geode.protocol.turns import TerminationReason
from geode.tools.spec import ToolResult


def check_round_entry(state: TurnState, settings: LoopSettings) -> None:
    """Before a round: max rounds and the wall-clock time budget."""
    g = state.guards
    if settings.max_rounds and g.round_index >= settings.max_rounds:
        raise Terminal(TerminationReason.MAX_ROUNDS, text=f"Round limit ({settings.max_rounds}) reached.")
    if settings.time_budget_s and state.elapsed() >= settings.time_budget_s:
        raise Terminal(
            TerminationReason.TIME_BUDGET_EXPIRED,
            text=f"Time budget ({settings.time_budget_s:g}s) expired after {g.round_index} rounds.",
        )


def wrap_up(state: TurnState, settings: LoopSettings) -> bool:
    """True when the next call must produce text (tools off): few rounds or little time left."""
    if settings.max_rounds and settings.max_rounds - state.guards.round_index <= settings.wrap_up_rounds:
        return True
    return bool(settings.time_budget_s and settings.time_budget_s - state.elapsed() <= settings.wrap_up_s)


def check_cost(state: TurnState, settings: LoopSettings) -> bool:
    """Stop at 100 % of the cost budget; returns True once when 80 % is first crossed (a warning)."""
    if not settings.cost_budget_usd:
        return False
    spent = state.guards.cost_usd
    if spent >= settings.cost_budget_usd:
        raise Terminal(
            TerminationReason.COST_BUDGET_EXCEEDED,
            error=f"cost ${spent:.4f} reached the budget ${settings.cost_budget_usd:.4f}",
        )
    if spent >= 0.8 * settings.cost_budget_usd and not state.guards.cost_warned:
        state.guards.cost_warned = True
        return True
    return False


def _signature(pairs: list[tuple[str, dict, object]]) -> str:
    raw = json.dumps([[n, a, c] for n, a, c in pairs], sort_keys=True, default=str)
    return hashlib.sha256(raw.encode()).hexdigest()


def observe_batch(
    state: TurnState, settings: LoopSettings, calls: list[tuple[str, dict]], results: list[ToolResult]
):
    """Update the progress guards with one executed batch; raise Terminal when a guard trips."""
    g = state.guards
    sig = _signature([(n, a, r.content) for (n, a), r in zip(calls, results, strict=True)])
    all_errors = bool(results) and all(r.is_error for r in results)
    state.last_batch_all_errors = all_errors
    if all_errors:
        g.success_streak, g.last_success_signature = 0, ""
        g.error_streak = g.error_streak + 1 if sig == g.last_error_signature else 1
        g.last_error_signature = sig
        if g.error_streak >= settings.error_guard:
            raise Terminal(
                TerminationReason.CONVERGENCE_DETECTED,
                error=f"{g.error_streak} identical failing tool batches in a row",
            )
        return
    g.error_streak, g.last_error_signature = 0, ""
    if any(r.is_error for r in results):
        g.success_streak, g.last_success_signature = 0, ""
        return
    g.success_streak = g.success_streak + 1 if sig == g.last_success_signature else 1
    g.last_success_signature = sig
    if g.success_streak >= settings.success_guard:
        raise Terminal(
            TerminationReason.REPEATED_SUCCESS_NO_PROGRESS,
            error=f"{g.success_streak} identical successful tool batches in a row",
        )
