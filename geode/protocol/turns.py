"""Messages of the turns protocol area: lanes ↔ loop worker (ready, heartbeat, run, events, done, cancel).

Flow: a loop worker connects to the ``lanes`` endpoint as a peer and sends ``worker.ready``, then
``worker.heartbeat`` periodically. Lanes pushes ``turn.run`` (and ``turn.cancel``) to the worker by its peer
name; the worker streams ``turn.event`` casts (ordered per session by ``seq``; several events produced back to
back go as one ``turn.events`` cast) and ends with ``turn.done`` (carrying the events still held at the end).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from geode.protocol.catalog import message


class TerminationReason(StrEnum):
    """The closed set of ways a turn ends (each documented in docs/loop.md)."""

    NATURAL = "natural"
    FORCED_TEXT = "forced_text"
    MAX_ROUNDS = "max_rounds"
    TIME_BUDGET_EXPIRED = "time_budget_expired"
    COST_BUDGET_EXCEEDED = "cost_budget_exceeded"
    CONTEXT_EXHAUSTED = "context_exhausted"
    BILLING_ERROR = "billing_error"
    MODEL_ACTION_REQUIRED = "model_action_required"
    MODEL_REFUSAL = "model_refusal"
    CONVERGENCE_DETECTED = "convergence_detected"
    REPEATED_SUCCESS_NO_PROGRESS = "repeated_success_no_progress"
    INPUT_BLOCKED = "input_blocked"
    USER_CANCELLED = "user_cancelled"
    CHECKPOINT_UNAVAILABLE = "checkpoint_unavailable"
    EXTERNAL_VERIFICATION_REQUIRED = "external_verification_required"
    INTERNAL_ERROR = "internal_error"
    WORKER_LOST = "worker_lost"  # lanes: its loop worker died under it more than [lanes] max_requeues times


SUCCESS_REASONS = frozenset({TerminationReason.NATURAL, TerminationReason.FORCED_TEXT})
FAILURE_REASONS = frozenset(
    {
        TerminationReason.MODEL_ACTION_REQUIRED,
        TerminationReason.CONTEXT_EXHAUSTED,
        TerminationReason.BILLING_ERROR,
        TerminationReason.COST_BUDGET_EXCEEDED,
        TerminationReason.CONVERGENCE_DETECTED,
        TerminationReason.EXTERNAL_VERIFICATION_REQUIRED,
        TerminationReason.CHECKPOINT_UNAVAILABLE,
        TerminationReason.INTERNAL_ERROR,
        TerminationReason.WORKER_LOST,
    }
)


class TurnEventKind(StrEnum):
    ROUND_START = "round_start"  # {round}
    TEXT_DELTA = "text_delta"  # {text}
    TOOL_START = "tool_start"  # {id, name, args_preview}
    TOOL_END = "tool_end"  # {id, name, error, duration_s}
    TOKENS = "tokens"  # {model, input, output, cost}
    CHECKPOINT_SAVED = "checkpoint_saved"  # {seq, phase}
    RETRY_WAIT = "retry_wait"  # {seconds, attempt}
    LLM_RETRY = "llm_retry"  # {attempt, error_kind, message}
    FALLBACK = "fallback"  # {from_model, to_model}
    APPROVAL_REQUEST = "approval_request"  # {request_id, tool, detail}
    VERIFY = "verify"  # {attempt, action, reason}
    TERMINATION = "termination"  # {reason, rounds}


# --- worker pool ------------------------------------------------------------------------------------


class WorkerReady(BaseModel):
    """A loop worker announces itself to lanes (reliable-worker pattern): name, incarnation, free slots."""

    worker: str
    incarnation: int = Field(ge=0)
    capacity: int = Field(default=1, ge=0)  # 0: retiring (geode.loop.retirement): pushed nothing new
    address: str = Field(default="", max_length=64)  # a worker host's address on its route to main (status)


class WorkerHeartbeat(BaseModel):
    """Periodic liveness from a worker, with the turns it is running."""

    worker: str
    incarnation: int = Field(ge=0)
    running: list[str] = Field(default_factory=list)
    free: int = Field(default=0, ge=0)


class Ack(BaseModel):
    """Generic acknowledgement."""

    ok: bool = True


class HeartbeatAck(Ack):
    """A heartbeat's answer. ``ok`` false: that incarnation is dead (a late beat). ``catalogue`` changes
    whenever main's executor starts, becomes ready or exits (its tool catalogue may have changed: MCP servers,
    trust): a remote loop worker that sees it change asks for the catalogue again, as a local one does on
    those lifecycle events."""

    catalogue: str = Field(default="", max_length=64)


# --- turns ------------------------------------------------------------------------------------------


class TurnInput(BaseModel):
    """The user input of a turn; extra keys (attachments, channel ids) are carried through."""

    model_config = ConfigDict(extra="allow")
    text: str = ""
    # ``images``: the turn's pictures as ImageBlock dicts (media_type, sha256, path, size), by reference


class TurnRun(BaseModel):
    """Run (or, with ``resume``, resume from its checkpoint) one durable turn on this worker."""

    turn_id: str = Field(min_length=1, max_length=128)
    session_id: str = Field(min_length=1, max_length=128)
    mode: str = "IPC"
    origin: str = ""
    input: TurnInput = Field(default_factory=TurnInput)
    resume: bool = False
    attempt: int = Field(default=0, ge=0)
    settings: dict[str, Any] = Field(default_factory=dict)  # model, time_budget_s, cost_budget_usd, ...


class TurnRunAccepted(BaseModel):
    accepted: bool = True
    worker: str = ""
    reason: str = ""


class TurnEvent(BaseModel):
    """One streamed event of a running turn. ``seq`` orders events per session (monotonic, from 1)."""

    session_id: str
    turn_id: str
    seq: int = Field(ge=1)
    kind: TurnEventKind
    data: dict[str, Any] = Field(default_factory=dict)


# events of one turn sent in one frame (geode/loop/event_batch.py): at most this many
TURN_EVENTS_MAX = 64


class TurnEvents(BaseModel):
    """Several events of one running turn in one frame, in ``seq`` order: the events the loop produced
    back to back without waiting on anything (each keeps its own ``seq``; lanes relays them one by one)."""

    events: list[TurnEvent] = Field(min_length=1, max_length=TURN_EVENTS_MAX)


class TurnUsage(BaseModel):
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0


class TurnResult(BaseModel):
    """What a turn produced. ``pending_text`` is a candidate withheld by verification escalation."""

    text: str = ""
    termination_reason: TerminationReason
    tool_calls: int = 0
    rounds: int = 0
    usage: TurnUsage = Field(default_factory=TurnUsage)
    error: str | None = None
    pending_text: str | None = None
    verify_attempts: int = 0

    @property
    def succeeded(self) -> bool:
        return self.termination_reason in SUCCESS_REASONS


class TurnDone(BaseModel):
    """The terminal report of a turn (lanes marks the turn record done and frees the lane). ``events``: the
    turn's last events the loop still held when it ended (its ``termination`` among them), in ``seq`` order;
    lanes relays them as a ``turn.events`` frame's, before the turn's end (one frame fewer a turn)."""

    turn_id: str
    session_id: str
    worker: str = ""
    incarnation: int = 0
    result: TurnResult
    events: list[TurnEvent] = Field(default_factory=list, max_length=TURN_EVENTS_MAX)


class TurnCancel(BaseModel):
    """Cancel a running turn: the loop stops between phases and ends it ``user_cancelled``."""

    turn_id: str
    session_id: str | None = None
    reason: str = ""


WORKER_READY = message("worker.ready", WorkerReady, Ack)
WORKER_HEARTBEAT = message("worker.heartbeat", WorkerHeartbeat, HeartbeatAck)
TURN_RUN = message("turn.run", TurnRun, TurnRunAccepted)
TURN_EVENT = message("turn.event", TurnEvent)
TURN_EVENTS = message("turn.events", TurnEvents)
TURN_DONE = message("turn.done", TurnDone, Ack)
TURN_CANCEL = message("turn.cancel", TurnCancel, Ack)
