"""Settling calls whose outcome the loop does not know, by their receipts (split from
:mod:`geode.loop.batch`): wait for an admitted receipt to settle, turn a lost reply into the stored outcome,
forget operations settled meanwhile."""

from __future__ import annotations

import logging
import time

from geode.loop.state import TurnState
from geode.records.client import RecordClient
from geode.records.models import Receipt, ReceiptState
from geode.tools.receipts import replayed
from geode.tools.spec import ToolCall, ToolContext, ToolResult

log = logging.getLogger(__name__)
NEVER_BEGAN = "executor_restarted"  # settle_unknown: the executor died before admitting the call
SETTLE_WAIT_S = 30.0  # how long an earlier send of the same call (receipt admitted) is awaited to settle


def await_settled(records: RecordClient, operation_id: str, receipt: Receipt | None) -> Receipt | None:
    """Wait (at most ``SETTLE_WAIT_S``) while ``receipt`` is admitted: its executor still runs the call and
    commits it, or dies and the store marks it uncertain (owner_died). Store errors propagate."""
    until = time.monotonic() + SETTLE_WAIT_S
    pause = 0.02
    while receipt is not None and receipt.state == ReceiptState.ADMITTED and time.monotonic() < until:
        time.sleep(pause)
        pause = min(0.2, pause * 2)
        receipt = records.get_receipt(operation_id)
    return receipt


def settle_unknown(records: RecordClient | None, ctx: ToolContext, result: ToolResult) -> ToolResult:
    """A call whose outcome the loop does not know (the executor died with it in flight) is settled by its
    receipt: none → it never began (reported as not run; the model may call it again); committed → the
    stored result; reconciled → the operator's outcome; admitted or uncertain → uncertain (an admitted one
    is marked uncertain so ``geode receipts --uncertain`` lists it and ``geode reconcile`` accepts it).

    A result blocked by another operation's receipt, or a store that does not answer, stays uncertain."""
    if records is None or result.error_type != "effect_outcome_uncertain" or not ctx.operation_id:
        return result
    content = result.content if isinstance(result.content, dict) else {}
    blocking = content.get("blocking_operation")
    if blocking not in (None, ctx.operation_id):
        return result  # quarantined by an earlier unresolved receipt: that one is listed for the operator
    call = ToolCall(id=result.tool_use_id, name=result.name)
    try:
        receipt = records.get_receipt(ctx.operation_id)
        if blocking is not None:  # the executor is alive; an earlier send of this very call may still run
            receipt = await_settled(records, ctx.operation_id, receipt)
        elif receipt is not None and receipt.state == ReceiptState.ADMITTED:  # its executor is gone
            records.mark_uncertain(ctx.operation_id, "the tool executor stopped while the call ran")
            receipt = records.get_receipt(ctx.operation_id)
    except Exception as exc:  # the store is down: the outcome stays unknown (conservative)
        log.warning("receipt of %s not readable: %s", ctx.operation_id, exc)
        return result
    if receipt is None:
        log.info("%s (%s) was never admitted: reported as not run", call.name, ctx.operation_id)
        return ToolResult.error(
            call,
            f"The tool executor stopped before '{call.name}' began; it did not run (no receipt), so you "
            "may call it again.",
            NEVER_BEGAN,
            executed=False,
            recoverable=True,
        )
    if receipt.state == ReceiptState.COMMITTED:
        log.info("%s (%s) was committed before its reply was lost", call.name, ctx.operation_id)
        return replayed(call, receipt.result or {})
    if receipt.state == ReceiptState.RECONCILED:
        return ToolResult.error(
            call,
            f"effect reconciled by {receipt.settled_by()} as {receipt.outcome}",
            "effect_reconciled",
            executed=receipt.outcome == "applied",
            outcome=receipt.outcome,
        )
    return result.model_copy(update={"content": {**content, "operation_id": ctx.operation_id}})


def drop_settled(state: TurnState, records: RecordClient) -> None:
    """Forget the turn's unresolved operations whose receipts were committed or reconciled meanwhile (an
    earlier send of the call finished after all), so Verify does not escalate over nothing to reconcile."""
    keep = []
    for op in state.unresolved:
        try:
            receipt = records.get_receipt(op)
        except Exception:  # the store is down: keep it unresolved (conservative)
            keep.append(op)
            continue
        if receipt is None or receipt.state in (ReceiptState.ADMITTED, ReceiptState.UNCERTAIN):
            keep.append(op)
    state.unresolved[:] = keep
