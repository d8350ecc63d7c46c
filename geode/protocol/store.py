"""Messages of the store protocol area: checkpoints, receipts, timeline, evidence, turns, cursors, dedupe.

Every write carries its idempotency key (checkpoint seq, operation id + attempt token, event id, turn id,
cursor position, dedupe token), so a client may retry after a timeout or a store restart.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from geode.protocol.catalog import message
from geode.records.models import (
    AdmitResult,
    CheckpointSave,
    Observation,
    Receipt,
    ReceiptIdentity,
    RestorePage,
    SaveResult,
    SessionSummary,
    TimelineEvent,
    TimelineRow,
    TurnRecord,
)

Id = Field(min_length=1, max_length=256)


# checkpoints ------------------------------------------------------------------------------------------
class SaveCheckpoint(CheckpointSave):
    """Save what is new since ``base_count`` plus the state record, and its timeline rows in the same write;
    idempotent by (session_id, seq)."""


class LoadCheckpoint(BaseModel):
    """The restore path, paged by size: state plus messages from ``from_index``."""

    session_id: str = Id
    from_index: int = Field(default=0, ge=0)


class LoadReply(BaseModel):
    page: RestorePage | None = None


class ListSessions(BaseModel):
    """Sessions by most recent update, with their unresolved receipt counts."""

    limit: int = Field(default=200, ge=1, le=5000)


class SessionList(BaseModel):
    sessions: list[SessionSummary]
    truncated: bool = False  # True: cut to fit one reply frame (fewer than asked, more exist)


# receipts ---------------------------------------------------------------------------------------------
class AdmitReceipt(BaseModel):
    """Admit an effect before running it: NEW, REPLAY (stored result), UNCERTAIN or CONFLICT."""

    operation_id: str = Id
    identity: ReceiptIdentity
    owner: str = Field(default="", max_length=128)  # "<name>#<incarnation>"; defaults to the sender
    effect: str = Field(default="", max_length=64)
    attempt: str = Field(default="", max_length=64)  # same token on a retried request = same admission
    observation: Observation | None = None  # how to settle it by looking if its outcome becomes unknown
    # a retry's predecessor: admitted only once that receipt is committed "not posted, retry at T"
    after: str = Field(default="", max_length=128)


class CommitReceipt(BaseModel):
    """Store the (bounded) result of an admitted effect."""

    operation_id: str = Id
    result: dict[str, Any] = Field(default_factory=dict)


class MarkUncertain(BaseModel):
    """The outcome of an admitted effect is unknown (deadline passed, handler lost)."""

    operation_id: str = Id
    reason: str = Field(default="", max_length=500)


class GetReceipt(BaseModel):
    """One receipt by operation id."""

    operation_id: str = Id


class ReceiptReply(BaseModel):
    receipt: Receipt | None = None


class ListReceipts(BaseModel):
    """Receipts, newest first; ``uncertain_only`` lists those waiting for reconciliation."""

    session_id: str | None = Field(default=None, max_length=256)
    uncertain_only: bool = False
    limit: int = Field(default=200, ge=1, le=2000)


class ReceiptList(BaseModel):
    receipts: list[Receipt]  # results past the reply's size budget are replaced by {"omitted": true}


class ReconcileReceipt(BaseModel):
    """An operator's verdict on an admitted/uncertain effect: applied or not applied."""

    operation_id: str = Id
    outcome: Literal["applied", "not_applied", "not-applied"]
    by: str = Field(default="", max_length=128)  # defaults to the sender; "observation" needs ``evidence``
    note: str = Field(default="", max_length=2000)
    evidence: Observation | None = None  # what GEODE looked at (``observed`` set) when by="observation"


class OwnerDied(BaseModel):
    """Turn the admitted receipts of ``name`` (incarnation ≤ ``incarnation``) uncertain."""

    name: str = Field(min_length=1, max_length=64)
    incarnation: int = Field(ge=0)


class OwnerDiedReply(BaseModel):
    uncertain: int


# timeline and evidence --------------------------------------------------------------------------------
class AppendTimeline(TimelineEvent):
    """Append one observation row (redacted, bounded); idempotent by (session_id, event_id)."""


class AppendReply(BaseModel):
    seq: int


MAX_APPEND_MANY = 64


class AppendTimelines(BaseModel):
    """Append several rows in one request, in order (a tool call's rows): each as one ``AppendTimeline``."""

    events: list[AppendTimeline] = Field(min_length=1, max_length=MAX_APPEND_MANY)


class AppendManyReply(BaseModel):
    """Each row's seq in the request's order, -1 for a row not appended (``errors``: why, one line each)."""

    seqs: list[int]
    errors: list[str] = Field(default_factory=list)


class ReadTimeline(BaseModel):
    """Rows after ``after_seq``, paged by size; ``next_after`` is set when more remain."""

    session_id: str = Id
    after_seq: int = Field(default=0, ge=0)
    limit: int = Field(default=1000, ge=1, le=10000)


class TimelinePage(BaseModel):
    rows: list[TimelineRow]
    next_after: int | None = None


class AppendEvidence(BaseModel):
    """Best-effort evidence ledger row (JSONL per session); never fails the caller's turn."""

    session_id: str = Id
    kind: str = Field(min_length=1, max_length=128)
    payload: dict[str, Any] = Field(default_factory=dict)
    turn_id: str = Field(default="", max_length=256)
    call_id: str = Field(default="", max_length=256)
    summary: str = Field(default="", max_length=2000)


class EvidenceReply(BaseModel):
    written: bool


# turns, cursors, dedupe -------------------------------------------------------------------------------
class PutTurn(TurnRecord):
    """Create or advance a turn record (a done turn never regresses)."""


class GetTurn(BaseModel):
    """One turn record by id."""

    turn_id: str = Id


class TurnReply(BaseModel):
    turn: TurnRecord | None = None


class ListTurns(BaseModel):
    """Turn records, optionally by state and/or session."""

    state: Literal["queued", "running", "done"] | None = None
    session_id: str | None = Field(default=None, max_length=256)
    offset: int = Field(default=0, ge=0)
    limit: int = Field(
        default=500, ge=1, le=5000
    )  # page size; ``next_offset`` says where the next page starts


class TurnList(BaseModel):
    turns: list[TurnRecord]
    next_offset: int | None = None


class GetCursor(BaseModel):
    """The stored position for (platform, account, channel)."""

    platform: str = Field(min_length=1, max_length=64)
    account: str = Field(default="", max_length=128)
    channel: str = Field(min_length=1, max_length=256)


class SetCursor(GetCursor):
    """Store a position for (platform, account, channel)."""

    position: str = Field(max_length=256)


class CursorReply(BaseModel):
    position: str | None = None


class Dedupe(BaseModel):
    """True the first time ``key`` is seen within ``ttl_s`` (or again for the same ``token``)."""

    key: str = Field(min_length=1, max_length=400)
    ttl_s: float = Field(ge=0, le=366 * 86400)
    token: str = Field(default="", max_length=64)


class DedupeReply(BaseModel):
    first: bool


class StatsQuery(BaseModel):
    """Environment, writer (group commit) and evidence counters."""


class StatsReply(BaseModel):
    stats: dict[str, Any]


class Prune(BaseModel):
    """Apply retention now: terminal sessions, old committed receipts, expired dedupe keys."""


class PruneReply(BaseModel):
    pruned: dict[str, int]


CHECKPOINT_SAVE = message("store.checkpoint.save", SaveCheckpoint, SaveResult)
CHECKPOINT_LOAD = message("store.checkpoint.load", LoadCheckpoint, LoadReply)
SESSIONS_LIST = message("store.sessions.list", ListSessions, SessionList)
RECEIPT_ADMIT = message("store.receipt.admit", AdmitReceipt, AdmitResult)
RECEIPT_COMMIT = message("store.receipt.commit", CommitReceipt, ReceiptReply)
RECEIPT_UNCERTAIN = message("store.receipt.uncertain", MarkUncertain, ReceiptReply)
RECEIPT_GET = message("store.receipt.get", GetReceipt, ReceiptReply)
RECEIPT_LIST = message("store.receipt.list", ListReceipts, ReceiptList)
RECEIPT_RECONCILE = message("store.receipt.reconcile", ReconcileReceipt, ReceiptReply)
RECEIPT_OWNER_DIED = message("store.receipt.owner_died", OwnerDied, OwnerDiedReply)
TIMELINE_APPEND = message("store.timeline.append", AppendTimeline, AppendReply)
TIMELINE_APPEND_MANY = message("store.timeline.append_many", AppendTimelines, AppendManyReply)
TIMELINE_READ = message("store.timeline.read", ReadTimeline, TimelinePage)
EVIDENCE_APPEND = message("store.evidence.append", AppendEvidence, EvidenceReply)
TURN_PUT = message("store.turn.put", PutTurn, TurnReply)
TURN_GET = message("store.turn.get", GetTurn, TurnReply)
TURN_LIST = message("store.turn.list", ListTurns, TurnList)
CURSOR_GET = message("store.cursor.get", GetCursor, CursorReply)
CURSOR_SET = message("store.cursor.set", SetCursor, CursorReply)
DEDUPE = message("store.dedupe", Dedupe, DedupeReply)
STATS = message("store.stats", StatsQuery, StatsReply)
PRUNE = message("store.prune", Prune, PruneReply)
