"""Record schemas shared by the store and its clients (the store protocol's vocabulary)."""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

MAX_SAVE_ROWS = 16  # timeline rows a checkpoint save may carry


class SessionStatus(StrEnum):
    ACTIVE = "active"
    PAUSED = "paused"
    COMPLETED = "completed"
    ERROR = "error"


class PendingOperation(BaseModel):
    """One tool_use of a pending batch and the operation id minted for it before anything ran."""

    model_config = ConfigDict(frozen=True)
    tool_use_id: str
    operation_id: str
    name: str


class PendingBatch(BaseModel):
    """The proposed tool batch saved before any call is sent (write-ahead)."""

    model_config = ConfigDict(frozen=True)
    turn_id: str
    step_id: str
    operations: tuple[PendingOperation, ...]


class CheckpointSave(BaseModel):
    """Write what is new since the last save: messages appended from ``base_count``, plus the state record.

    Idempotent by (session_id, seq): re-sending the same seq with the same content is a no-op; a lower or
    equal seq with different content is a conflict.
    """

    session_id: str
    seq: int = Field(ge=1)
    base_count: int = Field(ge=0)  # how many messages the store already has for this session
    new_messages: list[dict[str, Any]] = Field(default_factory=list)  # geode.conversation.Message dumps
    status: SessionStatus = SessionStatus.ACTIVE
    reopen: bool = False  # required to move a completed/error session back to active
    cognitive_state: dict[str, Any] = Field(default_factory=dict)
    guard_counters: dict[str, Any] = Field(default_factory=dict)
    pending_batch: PendingBatch | None = None
    model_settings: dict[str, Any] = Field(default_factory=dict)
    meta: dict[str, Any] = Field(default_factory=dict)  # mode, workspace, origin, title, user_input, turn_id
    # the session's creation time the saver restored (a fence: a session created at another time refuses it)
    session_created_at: float | None = None
    # timeline rows written in the save's own write, durable exactly when it is (records/checkpoint_rows.py)
    timeline: list[TimelineEvent] = Field(default_factory=list, max_length=MAX_SAVE_ROWS)


class CheckpointState(BaseModel):
    """The small per-session state record (the last save's state, without messages)."""

    session_id: str
    seq: int
    message_count: int
    status: SessionStatus
    cognitive_state: dict[str, Any] = Field(default_factory=dict)
    guard_counters: dict[str, Any] = Field(default_factory=dict)
    pending_batch: PendingBatch | None = None
    model_settings: dict[str, Any] = Field(default_factory=dict)
    meta: dict[str, Any] = Field(default_factory=dict)
    created_at: float
    updated_at: float


class Restored(BaseModel):
    """The one restore path: state plus every message, in order."""

    state: CheckpointState
    messages: list[dict[str, Any]]


class SaveResult(BaseModel):
    """What a checkpoint save left in the store (``noop`` when it was an idempotent repeat)."""

    session_id: str
    seq: int
    message_count: int
    status: SessionStatus
    noop: bool = False
    # whether the session held an admitted or uncertain receipt when the save was written (None: not told)
    receipts_open: bool | None = None


class RestorePage(BaseModel):
    """One page of a restore: the state record plus messages from ``from_index``; ``next_index`` if more."""

    state: CheckpointState
    messages: list[dict[str, Any]]
    from_index: int = 0
    next_index: int | None = None


class ReceiptIdentity(BaseModel):
    """What makes an operation id mean one call: re-admitting with a different identity is a CONFLICT."""

    model_config = ConfigDict(frozen=True)
    session_id: str
    turn_id: str
    step_id: str
    tool_name: str
    fingerprint: str  # sha256 of canonical {tool_name, arguments}

    def is_chat_reply(self) -> bool:
        """A chat reply's receipt (``geode/tools/reply_delivery.py`` admits it under this step and tool)."""
        return self.step_id == REPLY_STEP and self.tool_name == REPLY_TOOL


REPLY_TOOL = "messenger_reply"  # the tool name and step of a chat reply's receipt
REPLY_STEP = "reply"


class ReceiptState(StrEnum):
    ADMITTED = "admitted"
    COMMITTED = "committed"
    UNCERTAIN = "uncertain"
    RECONCILED = "reconciled"


class AdmitKind(StrEnum):
    NEW = "new"  # admitted now: the caller may run the handler
    REPLAY = "replay"  # committed earlier: here is the stored result, do not run
    UNCERTAIN = "uncertain"  # admitted/uncertain earlier, or the session is quarantined: do not run
    CONFLICT = "conflict"  # same op id, different identity: do not run


class AdmitResult(BaseModel):
    kind: AdmitKind
    result: dict[str, Any] | None = None
    reason: str = ""
    blocking_operation: str | None = None


class Observation(BaseModel):
    """How an effect can be settled by looking instead of asking a person. ``kind`` names the probe
    (``file_sha256``: a file's sha256 hex, ``absent`` when missing; a chat post can use its own kind),
    ``target`` what is looked at, ``before`` its state at admission, ``intended`` the state the effect leaves,
    ``observed`` what a settle found (set only on the evidence of a reconciliation)."""

    model_config = ConfigDict(frozen=True)
    kind: str = Field(min_length=1, max_length=32)
    target: str = Field(min_length=1, max_length=4096)
    before: str = Field(max_length=128)
    intended: str = Field(max_length=128)
    observed: str | None = Field(default=None, max_length=128)

    def verdict(self, found: str) -> str | None:
        """``applied`` when ``found`` is the intended state, ``not_applied`` when it is still the state
        before, None (stays uncertain) for anything else."""
        if found == self.intended:
            return "applied"
        if found == self.before:
            return "not_applied"
        return None


class Receipt(BaseModel):
    operation_id: str
    identity: ReceiptIdentity
    state: ReceiptState
    owner: str  # "<child name>#<incarnation>"
    effect: str = ""
    created_at: float
    updated_at: float
    result: dict[str, Any] | None = None
    uncertain_reason: str | None = None
    # "applied" | "not_applied" once reconciled; "interrupted" on a committed command GEODE itself stopped
    outcome: str | None = None
    reconciled_by: str | None = None  # "operator", or "observation" (``observation`` then holds the evidence)
    note: str | None = None
    reconciled_at: float | None = None
    attempt: str | None = None  # admission token: an admit retried with it is the same admission
    observation: Observation | None = None  # recorded at admission; with ``observed`` once settled by it

    def settled_by(self) -> str:
        """Who reconciled it, as a person or the model reads it."""
        if self.reconciled_by == "observation":
            return "observation (GEODE looked at its target)"
        return "an operator"


class TimelineEvent(BaseModel):
    """An append-only observation row. Idempotent by (session_id, event_id)."""

    session_id: str
    event_id: str
    kind: str  # e.g. "turn.started", "tool.called", "tool.completed", "tool.denied", "turn.ended"
    ts: float
    payload: dict[str, Any] = Field(default_factory=dict)


CheckpointSave.model_rebuild()  # its ``timeline`` rows are TimelineEvents (defined above)


class TimelineRow(BaseModel):
    event: TimelineEvent
    seq: int
    payload_hash: str
    corrupt: bool = False


class TurnState(StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    DONE = "done"


# the ``_``-keys a record stored by an older version carries in its input instead of the typed fields
_LEGACY_INPUT_KEYS = {"_settings": "settings", "_resume": "resume", "_requeues": "requeues"}


class TurnRecord(BaseModel):
    """A durable turn: queued → running on worker W incarnation N → done with an outcome.

    ``input`` is the user's input only (text, attachments); ``settings`` is the session spec the loop worker
    composes the turn from, ``resume`` says it runs from its checkpoint, ``requeues`` counts the losses of
    its worker. A record stored before these were fields (``_settings`` / ``_resume`` / ``_requeues`` in its
    input) is read into them (:meth:`_from_legacy_input`)."""

    turn_id: str
    session_id: str
    state: TurnState = TurnState.QUEUED
    mode: str = "IPC"
    origin: str = ""
    input: dict[str, Any] = Field(default_factory=dict)
    settings: dict[str, Any] = Field(default_factory=dict)
    resume: bool = False
    requeues: int = Field(default=0, ge=0)
    worker: str | None = None
    incarnation: int | None = None
    attempts: int = 0
    outcome: dict[str, Any] | None = None
    created_at: float = 0.0
    updated_at: float = 0.0
    trace: str | None = None  # the traceparent of its admission span (tracing on): resumes stay in the trace

    @model_validator(mode="before")
    @classmethod
    def _from_legacy_input(cls, data: Any) -> Any:
        """Move an older record's ``_``-keys out of its input into the typed fields (a field already set
        wins); a count that is not a count reads as 0, as the older reader took it."""
        if not isinstance(data, dict) or not isinstance(data.get("input"), dict):
            return data
        inp = data["input"]
        if _LEGACY_INPUT_KEYS.keys().isdisjoint(inp):  # (no generator a validation)
            return data
        data = {**data, "input": {k: v for k, v in inp.items() if k not in _LEGACY_INPUT_KEYS}}
        for old, field in _LEGACY_INPUT_KEYS.items():
            if old in inp and field not in data:
                data[field] = inp[old]
        data["settings"] = data.get("settings") if isinstance(data.get("settings"), dict) else {}
        data["resume"] = bool(data.get("resume"))
        try:
            data["requeues"] = max(0, int(data.get("requeues") or 0))
        except (TypeError, ValueError):
            data["requeues"] = 0
        return data


class SessionSummary(BaseModel):
    session_id: str
    status: SessionStatus
    seq: int
    message_count: int
    updated_at: float
    meta: dict[str, Any] = Field(default_factory=dict)
    unresolved_receipts: int = 0
