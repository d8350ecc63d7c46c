"""Phase 4, process tools: write-ahead the pending batch, run it against its snapshot, keep the results.

One checkpoint save per tool round: the pending batch, strict, before any call is sent. The results are not
saved on their own; they ride the next save (the next round's pending batch, the turn's final save, a
compaction record or a verification note). A crash before that save is the same case as a crash while the
tools ran: the resume repairs the batch from its receipts (:mod:`geode.loop.resume`), never re-running an
effect that began."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from concurrent.futures import Future, wait
from contextvars import Context, copy_context
from functools import partial
from typing import Any

from geode.conversation import Message, TextBlock, ToolUseBlock
from geode.faults import fault
from geode.lone_surrogates import escape_text, escape_tree, first_lone_surrogate
from geode.loop.checkpoint import Checkpointer, CheckpointUnavailable
from geode.loop.effect_ops import effect_rows, not_unicode_rows
from geode.loop.events import EventStream, tool_waits
from geode.loop.one_call import await_one
from geode.loop.ports import ToolRunner
from geode.loop.result_blocks import TEXT, cancel_report, not_unicode_result, over_cap_result, results_message
from geode.loop.result_blocks import result_block as result_block  # imported from here by callers
from geode.loop.reused_threads import TOOL_CALLS
from geode.loop.settings import LoopSettings
from geode.loop.snapshot import StepSnapshot
from geode.loop.state import Terminal, TurnState
from geode.protocol.turns import TerminationReason, TurnEventKind
from geode.records.client import RecordClient
from geode.records.models import PendingBatch, PendingOperation, Receipt, ReceiptState
from geode.tools.receipts import replayed
from geode.tools.result_summary import result_summary
from geode.tools.spec import ToolCall, ToolContext, ToolResult

log = logging.getLogger(__name__)
CANCEL_GRACE_S = 2.5  # after a cancel, how long the real outcomes of the calls in flight are awaited
NEVER_BEGAN = "executor_restarted"  # settle_unknown: the executor died before admitting the call
SETTLE_WAIT_S = 30.0  # how long an earlier send of the same call (receipt admitted) is awaited to settle


def assistant_message(
    snapshot: StepSnapshot,
    text: str,
    calls: tuple[ToolUseBlock, ...],
    over_cap: int = 0,
    not_unicode: dict[str, str] | None = None,
) -> Message:
    """The assistant tool batch, carrying each call's operation id and the snapshot identity.

    ``over_cap``: the per-reply cap when the reply had more calls; those beyond it get no operation id
    and are listed in ``over_cap`` (never run, also not by a resume). ``not_unicode``: the calls whose
    arguments had a lone surrogate (id → where; their input is escaped): no operation id either, listed
    in ``not_unicode`` so that a resume answers them as the batch did, without sending them."""
    content: list[Any] = [TextBlock(text=text)] if text else []
    content.extend(calls)
    run, over = (calls[:over_cap], calls[over_cap:]) if over_cap else (calls, ())
    refused = not_unicode or {}
    ops = ((c.id, snapshot.operation_id(c.id), snapshot.step_id) for c in run if c.id not in refused)
    meta: dict[str, Any] = {
        "effect_operations": effect_rows(ops),  # rows, not a map keyed by tool_use id (effect_ops.py)
        "step": {
            "model": snapshot.model,
            "provider": snapshot.provider,
            "adapter": snapshot.adapter,
            "plan_hash": snapshot.plan_hash,
            "plan_generation": snapshot.plan_generation,
            "verify_attempt": snapshot.verify_attempt,
        },
    }
    if over:
        meta["over_cap"] = {"cap": over_cap, "ids": [c.id for c in over]}
    if refused:
        meta["not_unicode"] = not_unicode_rows(refused)  # rows too: no map keyed by tool_use id
    return Message(role="assistant", content=tuple(content), metadata=meta)


def pending_of(snapshot: StepSnapshot, calls: tuple[ToolUseBlock, ...]) -> PendingBatch:
    return PendingBatch(
        turn_id=snapshot.turn_id,
        step_id=snapshot.step_id,
        operations=tuple(
            PendingOperation(tool_use_id=c.id, operation_id=snapshot.operation_id(c.id), name=c.name)
            for c in calls
        ),
    )


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


def run_calls(
    executor: ToolRunner,
    jobs: list[tuple[ToolContext, ToolCall]],
    state: TurnState,
    events: EventStream,
    parallelism: int,
    records: RecordClient | None = None,
) -> list[ToolResult]:
    """Execute calls (concurrently up to ``parallelism``); results come back in the calls' order.

    With ``records``, a call whose outcome is unknown is settled by its receipt (:func:`settle_unknown`)."""

    def one(ctx: ToolContext, call: ToolCall) -> ToolResult:
        if state.cancel.is_set():
            return ToolResult.error(call, "the turn was cancelled before this call was sent", "cancelled")
        preview = TEXT.encode(call.input)[:200]
        events.emit(TurnEventKind.TOOL_START, id=call.id, name=call.name, args_preview=preview)
        t0 = time.monotonic()
        for sent in range(2):
            try:
                result = executor.execute(ctx, call)
            except Exception as exc:  # the executor did not answer: the outcome is unknown
                why = f"executor failed: {exc}"[:500]
                result = ToolResult.error(call, why, "executor_error", executed=None)
            if result.tool_use_id != call.id:
                result = result.model_copy(update={"tool_use_id": call.id})
            result = settle_unknown(records, ctx, result)
            if sent or result.error_type != NEVER_BEGAN or state.cancel.is_set():
                break
            # the executor died before admitting it: send it again under the same operation id, so a copy
            # of the first send still queued for the next incarnation is deduplicated by its receipt (the
            # model is never told "it did not run" while that copy runs after all)
            log.info("%s (%s) never began: sending it again", call.name, ctx.operation_id)
        events.emit(
            TurnEventKind.TOOL_END,
            id=call.id,
            name=call.name,
            error=result.error_type if result.is_error else None,
            duration_s=round(time.monotonic() - t0, 4),
            summary=result_summary(result),  # the CLI's one-line ⎿ result
        )
        return result

    def in_context(context: Context, ctx: ToolContext, call: ToolCall) -> ToolResult:
        return context.run(one, ctx, call)  # the turn's trace context

    # threads reused across batches (geode.loop.reused_threads); a call abandoned by a cancel finishes (or
    # times out) on its own
    if parallelism <= 1 or len(jobs) == 1:  # in order: the next call is sent after the previous answered
        stop, grace = partial(cancel_in_executor, executor, state), CANCEL_GRACE_S
        jobs_in_context = ((partial(in_context, copy_context(), ctx, call), call) for ctx, call in jobs)
        return [await_one(job, call, state.cancel, stop, grace) for job, call in jobs_in_context]
    work = [(copy_context(), ctx, call) for ctx, call in jobs]
    futures = TOOL_CALLS.map_ordered(in_context, work, parallelism)
    return _await(futures, [c for _, c in jobs], state, executor)


def _await(
    futures: list[Future[ToolResult]],
    calls: list[ToolCall],
    state: TurnState,
    executor: ToolRunner | None = None,
) -> list[ToolResult]:
    """Wait for the calls. A cancel is passed on to the executor (it kills what runs and refuses the rest),
    then the real outcomes are awaited for ``CANCEL_GRACE_S``; a call still running after that is unknown."""
    pending, waits = set(futures), tool_waits(0.05)  # held tool_starts sent after the first (TOOL_HOLD_S)
    while pending:
        _, pending = wait(pending, timeout=next(waits))
        if pending and state.cancel.is_set():
            cancel_in_executor(executor, state)
            _, pending = wait(pending, timeout=CANCEL_GRACE_S)
            break
    return [
        f.result()
        if f.done()
        else ToolResult.error(
            c,
            "the turn was cancelled while this call ran; its outcome is unknown",
            "cancelled_outcome_unknown",
            executed=None,
        )
        for f, c in zip(futures, calls, strict=True)
    ]


def cancel_in_executor(executor: ToolRunner | None, state: TurnState) -> None:
    """Ask the executor to cancel this turn's calls (idempotent; best effort: a failure is logged)."""
    cancel = getattr(executor, "cancel", None)
    if cancel is None:
        return
    try:
        touched = cancel(state.session_id, state.turn_id)
        log.info("turn %s cancelled in the executor (%s call(s) touched)", state.turn_id, touched)
    except Exception as exc:
        log.warning("cancelling turn %s in the executor failed: %s", state.turn_id, exc)


def process_batch(
    snapshot: StepSnapshot,
    text: str,
    calls: tuple[ToolUseBlock, ...],
    *,
    state: TurnState,
    executor: ToolRunner,
    checkpoint: Checkpointer,
    events: EventStream,
    settings: LoopSettings,
    save_meta: dict[str, Any],
    observe: Callable[[list[ToolResult]], None] | None = None,
    records: RecordClient | None = None,
) -> list[ToolResult]:
    """Save the pending batch (strict) → execute → append the results → observe (guards).

    The results ride the next save (see the module's docstring), except when a guard that trips in
    ``observe`` or a cancel ends the turn here: then the completed batch is saved at once (a resume must not
    send a call they kept back). Calls beyond ``settings.max_tool_calls_per_reply``
    are not run: each gets an error tool_result."""
    cap = settings.max_tool_calls_per_reply
    over = calls[cap:]
    if over:
        log.warning("turn %s: %d tool calls in one reply, only %d run", state.turn_id, len(calls), cap)
    bad = {c.id: where for c in calls if (where := first_lone_surrogate(c.input))}  # not valid Unicode
    calls = tuple(c.model_copy(update={"input": escape_tree(c.input)}) if c.id in bad else c for c in calls)
    state.history.append(assistant_message(snapshot, escape_text(text), calls, cap if over else 0, bad))
    refused = [c for c in calls[:cap] if c.id in bad]  # answered below, never sent to the executor
    calls = tuple(c for c in calls[:cap] if c.id not in bad)
    fault("loop.before_pending_checkpoint")  # the model saw the previous batch's results, still unsaved
    try:
        seq = checkpoint.save(state, pending=pending_of(snapshot, calls), meta=save_meta)
    except CheckpointUnavailable as exc:
        state.history.pop()  # nothing ran: the proposal is dropped, not left dangling
        raise Terminal(
            TerminationReason.CHECKPOINT_UNAVAILABLE, error=f"pending batch not saved: {exc}"
        ) from exc
    events.emit(TurnEventKind.CHECKPOINT_SAVED, seq=seq, phase="pending_batch")
    fault("loop.after_pending_checkpoint")  # written ahead; no call sent yet
    tool_calls = [ToolCall(id=c.id, name=c.name, input=c.input) for c in calls]
    deadline_ms = None
    if settings.time_budget_s:  # tools never outlive the turn's time budget
        deadline_ms = int((time.time() + max(1.0, settings.time_budget_s - state.elapsed())) * 1000)
    jobs = [(snapshot.tool_context(c, deadline_ms=deadline_ms), c) for c in tool_calls]
    results = run_calls(executor, jobs, state, events, settings.tool_parallelism, records)
    state.guards.tool_calls += len(results)
    for (ctx, _), r in zip(jobs, results, strict=True):  # Verify escalates even before the store marks it
        if r.error_type == "effect_outcome_uncertain" and ctx.operation_id not in state.unresolved:
            state.unresolved.append(ctx.operation_id)
    results += [not_unicode_result(c, bad[c.id]) for c in refused]
    results += [over_cap_result(c, cap) for c in over]  # every tool_use gets its tool_result
    state.history.append(results_message(results, settings))
    tripped: Terminal | None = None
    try:
        if observe is not None:
            observe(results)
    except Terminal as t:  # a guard that trips ends the turn
        tripped = t
    fault("loop.before_completed_checkpoint")  # the batch ran; its results ride the next save …
    if tripped is not None or state.cancel.is_set():  # … unless the turn ends here: saved now, so that a
        try:  # resume never sends a call the guard or the cancel kept from being sent
            seq = checkpoint.save(state, pending=None, meta=save_meta)
        except CheckpointUnavailable as exc:
            raise Terminal(TerminationReason.CHECKPOINT_UNAVAILABLE, error=f"batch not saved: {exc}") from exc
        events.emit(TurnEventKind.CHECKPOINT_SAVED, seq=seq, phase="completed_batch")
    if tripped is not None:
        raise tripped
    if state.cancel.is_set():  # the answer says exactly what ran of the batch the cancel cut short
        report = cancel_report(results)
        raise Terminal(TerminationReason.USER_CANCELLED, text=f"Cancelled. {report}", error=report)
    return results
