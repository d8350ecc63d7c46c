"""Phase 6, finish: the TurnResult, the termination event, the final checkpoint and the timeline row."""

from __future__ import annotations

import logging
import time
from typing import Any

from geode.loop.checkpoint import Checkpointer
from geode.loop.events import EventStream
from geode.loop.state import Terminal, TurnState
from geode.protocol.turns import SUCCESS_REASONS, TerminationReason, TurnEventKind, TurnResult, TurnUsage
from geode.records.client import RecordClient
from geode.records.models import SessionStatus, TimelineEvent

log = logging.getLogger(__name__)


def finish_turn(
    state: TurnState, ckpt: Checkpointer, events: EventStream, outcome: Terminal, records: RecordClient
) -> TurnResult:
    """The result, the terminal event, the final save (``done_turn`` + result) and the timeline row."""
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
    if ckpt.seq or state.history:
        ckpt.save(state, status=status, strict=False)
    timeline(records, state, "turn.ended", {"reason": reason.value, "rounds": g.round_index})
    return result


def timeline(records: RecordClient, state: TurnState, kind: str, payload: dict[str, Any]) -> None:
    """Best-effort timeline row (observation only), idempotent by event id."""
    try:
        n = state.guards.verify_attempt
        records.append_timeline(
            TimelineEvent(
                session_id=state.session_id,
                event_id=f"{state.turn_id}:{kind}:{n}",
                kind=kind,
                ts=time.time(),
                payload=payload,
            )
        )
    except Exception as exc:  # observation only
        log.debug("timeline %s not written: %s", kind, exc)
