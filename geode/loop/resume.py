"""Resume repair: close an incomplete tool round from effect receipts before anything else happens.

committed receipt → the stored result; admitted → awaited until its executor commits it or dies (the
store marks it uncertain); uncertain → an ``effect_outcome_uncertain`` error;
reconciled → the operator's outcome as an error result (never re-run); no receipt → the call never
began, so it runs normally through the executor (every check again). Then the batch is saved strictly.

The same repair closes a batch that ran to the end when the process died before the results' save: a
round's results are not saved on their own but ride the next save (:mod:`geode.loop.batch`). A batch of
the turn being resumed is counted in its guards (rounds, tool calls) as the round that ran would have been.
"""

from __future__ import annotations

import logging

from geode.conversation import Message
from geode.loop.batch import (
    await_settled,
    not_unicode_result,
    over_cap_result,
    results_message,
    run_calls,
)
from geode.loop.checkpoint import Checkpointer, CheckpointUnavailable
from geode.loop.effect_ops import effect_operations, not_unicode_calls
from geode.loop.events import EventStream
from geode.loop.ports import ToolRunner
from geode.loop.settings import LoopSettings
from geode.loop.snapshot import skips_permissions
from geode.loop.state import Terminal, TurnState
from geode.protocol.turns import TerminationReason, TurnEventKind
from geode.records.client import RecordClient
from geode.records.models import PendingBatch, ReceiptState
from geode.tools.spec import ToolCall, ToolContext, ToolResult

log = logging.getLogger(__name__)


def incomplete_round(history: list[Message]) -> Message | None:
    """The trailing assistant tool batch without results, if any."""
    if history and history[-1].role == "assistant" and history[-1].tool_uses:
        return history[-1]
    return None


def _stored(call: ToolCall, raw: dict | None) -> ToolResult:
    if isinstance(raw, dict):
        try:
            return ToolResult.model_validate({**raw, "tool_use_id": call.id, "name": call.name})
        except Exception:  # a bare content dict
            return ToolResult(tool_use_id=call.id, name=call.name, content=raw, executed=True)
    return ToolResult(tool_use_id=call.id, name=call.name, content=raw, executed=True)


def repair(
    state: TurnState,
    *,
    pending: PendingBatch | None,
    records: RecordClient,
    executor: ToolRunner,
    checkpoint: Checkpointer,
    events: EventStream,
    settings: LoopSettings,
    base_ctx: dict,
) -> int:
    """Repair the trailing batch in ``state.history``; returns how many calls were repaired (0 = none)."""
    msg = incomplete_round(state.history)
    if msg is None:
        return 0
    ops = effect_operations(msg.metadata)
    if pending is not None:
        for op in pending.operations:
            ops.setdefault(op.tool_use_id, {"operation_id": op.operation_id, "step_id": pending.step_id})
    step_meta = msg.metadata.get("step") or {}
    base = dict(base_ctx)
    if pending is not None:
        base["turn_id"] = pending.turn_id
    results: dict[str, ToolResult] = {}
    to_run: list[tuple[ToolContext, ToolCall]] = []
    over_cap = msg.metadata.get("over_cap") or {}
    not_unicode = not_unicode_calls(msg.metadata)
    for tu in msg.tool_uses:
        call = ToolCall(id=tu.id, name=tu.name, input=tu.input)
        op = ops.get(tu.id)
        if op is None and tu.id in (over_cap.get("ids") or ()):
            results[tu.id] = over_cap_result(call, int(over_cap.get("cap", 0)))  # beyond the cap: never run
            continue
        if op is None and tu.id in not_unicode:  # a lone surrogate in its arguments: never sent
            results[tu.id] = not_unicode_result(call, not_unicode[tu.id])
            continue
        if op is None:
            results[tu.id] = ToolResult.error(
                call, "no operation id was recorded", "effect_outcome_uncertain", executed=None
            )
            continue
        receipt = records.get_receipt(op["operation_id"])
        if receipt is not None and receipt.state == ReceiptState.ADMITTED:
            # the worker died, maybe not the executor: a call still running there commits soon; a dead
            # executor's receipt turns uncertain as soon as the store hears of its death
            receipt = await_settled(records, op["operation_id"], receipt)
        if receipt is None:
            step_id = op.get("step_id", "")
            turn_id = pending.turn_id if pending is not None else step_id.rsplit(":step-", 1)[0]
            ctx = ToolContext(
                **{**base, "turn_id": turn_id or base.get("turn_id", "")},
                step_id=step_id,
                operation_id=op["operation_id"],
                model=step_meta.get("model", ""),
                provider=step_meta.get("provider", ""),
                adapter=step_meta.get("adapter", ""),
                plan_hash=step_meta.get("plan_hash", ""),
                plan_generation=int(step_meta.get("plan_generation", 0)),
                skip_permissions=skips_permissions(str(base.get("mode", "")), settings.skip_permissions),
            )
            to_run.append((ctx, call))
        elif receipt.state == ReceiptState.COMMITTED:
            results[tu.id] = _stored(call, receipt.result)
        elif receipt.state == ReceiptState.RECONCILED:
            results[tu.id] = ToolResult.error(
                call,
                f"effect reconciled by {receipt.settled_by()} as {receipt.outcome}",
                "effect_reconciled",
                executed=receipt.outcome == "applied",
                outcome=receipt.outcome,
            )
        else:
            state.unresolved.append(op["operation_id"])
            results[tu.id] = ToolResult.error(
                call,
                "the outcome of this call is unknown (its worker stopped while it ran); it is not re-run",
                "effect_outcome_uncertain",
                executed=None,
                operation_id=op["operation_id"],
            )
    if to_run:
        ran = run_calls(executor, to_run, state, events, settings.tool_parallelism, records)
        for (ctx, call), res in zip(to_run, ran, strict=True):
            results[call.id] = res
            if res.error_type == "effect_outcome_uncertain" and ctx.operation_id not in state.unresolved:
                state.unresolved.append(ctx.operation_id)
    ordered = [results[tu.id] for tu in msg.tool_uses]
    state.history.append(results_message(ordered, settings))
    if state.guards.turn_id == state.turn_id:  # this turn's round: counted as the round that ran would be
        state.guards.round_index += 1
        state.guards.tool_calls += sum(1 for tu in msg.tool_uses if tu.id in ops)
    try:
        seq = checkpoint.save(state, pending=None, meta={"repaired": len(ordered)})
    except CheckpointUnavailable as exc:
        raise Terminal(
            TerminationReason.CHECKPOINT_UNAVAILABLE, error=f"repaired batch not saved: {exc}"
        ) from exc
    events.emit(TurnEventKind.CHECKPOINT_SAVED, seq=seq, phase="repaired_batch")
    log.info("repaired %d calls of session %s (%d re-run)", len(ordered), state.session_id, len(to_run))
    return len(ordered)
