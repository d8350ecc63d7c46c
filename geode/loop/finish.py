"""Phase 6, finish: the TurnResult, the termination event, the final checkpoint and the timeline rows."""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import Any

from geode.loop.checkpoint import Checkpointer
from geode.loop.events import EventStream
from geode.loop.state import Terminal, TurnState
from geode.protocol.turns import SUCCESS_REASONS, TerminationReason, TurnEventKind, TurnResult, TurnUsage
from geode.records.client import RecordClient
from geode.records.models import SessionStatus, TimelineEvent

log = logging.getLogger(__name__)


def finish_turn(
    state: TurnState,
    ckpt: Checkpointer,
    events: EventStream,
    outcome: Terminal,
    records: RecordClient,
    rows: Sequence[TimelineEvent] = (),
) -> TurnResult:
    """The result, the terminal event, the final save (``done_turn`` + result) and the timeline rows:
    ``rows`` (the verification's decision) and ``turn.ended``, in the final save's store request."""
    reason = outcome.reason
    escalated = reason == TerminationReason.EXTERNAL_VERIFICATION_REQUIRED
    g = state.guards
    result = TurnResult(
        text="" if escalated else outcome.text,
        termination_reason=reason,
        tool_calls=g.tool_calls,
        rounds=g.round_index,
        usage=TurnUsage(input_tokens=g.input_tokens, output_tokens=g.output_tokens, cost_usd=g.cost_usd),
        error=None if reason in SUCCESS_REASONS else (outcome.error or reason.value),
        pending_text=outcome.text if escalated else None,
        verify_attempts=g.verify_attempt,
    )
    events.emit(TurnEventKind.TERMINATION, reason=reason.value, rounds=g.round_index, error=result.error)
    status = SessionStatus.PAUSED if escalated else SessionStatus.ACTIVE
    state.meta.update(done_turn=state.turn_id, last_result=result.model_dump(mode="json"))
    ended = timeline_row(state, "turn.ended", {"reason": reason.value, "rounds": g.round_index})
    if ckpt.seq or state.history:
        save_with_rows(ckpt, records, state, [*rows, ended], status=status)
    else:
        write_rows(records, [*rows, ended])
    return result


def save_with_rows(
    ckpt: Checkpointer,
    records: RecordClient,
    state: TurnState,
    rows: list[TimelineEvent],
    status: SessionStatus = SessionStatus.ACTIVE,
) -> None:
    """A non-strict save carrying ``rows`` in its own store write (one round trip); when the save fails the
    rows are written alone, best effort, as before."""
    if ckpt.save(state, status=status, strict=False, rows=rows) is None:
        write_rows(records, rows)


def timeline_row(state: TurnState, kind: str, payload: dict[str, Any]) -> TimelineEvent:
    """A timeline row of the turn, stamped now; its event id makes a second write of it a no-op."""
    n = state.guards.verify_attempt
    return TimelineEvent(
        session_id=state.session_id,
        event_id=f"{state.turn_id}:{kind}:{n}",
        kind=kind,
        ts=time.time(),
        payload=payload,
    )


def timeline(records: RecordClient, state: TurnState, kind: str, payload: dict[str, Any]) -> None:
    """Best-effort timeline row (observation only), idempotent by event id."""
    write_rows(records, [timeline_row(state, kind, payload)])


def write_rows(records: RecordClient, rows: list[TimelineEvent]) -> None:
    """Best-effort (observation only): several rows in one store request when the client can
    (``append_timelines``; an in-process engine appends them one by one)."""
    many = getattr(records, "append_timelines", None)
    if many is not None and len(rows) > 1:
        try:
            for error in many(rows):
                log.debug("timeline row not written: %s", error)
        except Exception as exc:  # observation only
            log.debug("timeline %s not written: %s", ", ".join(r.kind for r in rows), exc)
        return
    for row in rows:
        try:
            records.append_timeline(row)
        except Exception as exc:  # observation only
            log.debug("timeline %s not written: %s", row.kind, exc)
