"""Records of the webhook intake table (DESIGN §9, issue 30): one row per accepted delivery, what the
``record`` compare-and-set answers, the per-route counts, and the named refusals of the table.

A row's state only moves forward: recorded → submitted → answered → done (a step may be skipped, never
undone). The body travels as base64 in JSON and over the wire, and is bytes in Python."""

from __future__ import annotations

import base64
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import AwareDatetime, BaseModel, BeforeValidator, ConfigDict, Field, PlainSerializer

from geode.protocol.errors import Conflict, Unavailable

IntakeState = Literal["recorded", "submitted", "answered", "done"]
STATES: tuple[IntakeState, ...] = ("recorded", "submitted", "answered", "done")
OPEN_STATES = frozenset({"recorded", "submitted"})  # in the route's queue (its turn has not ended)
Delivery = Literal["", "posted", "refused", "uncertain", "none"]
Origin = Literal["sender", "replay"]
ROUTE = r"^[A-Za-z0-9_.-]{1,64}$"
MAX_BODY = 512 * 1024  # a row (base64 body) stays well inside one 1 MiB frame
REASON_MAX = 500
ID_MAX = (
    400  # a delivery id: a sender's (≤ 256), a stale window's ``<key>.<n>`` or a replay's ``<id>.replay-<n>``
)


def _to_bytes(value: Any) -> Any:
    return base64.b64decode(value, validate=True) if isinstance(value, str) else value


def _b64(value: bytes) -> str:
    return base64.b64encode(value).decode("ascii")


# bytes in Python; base64 text in JSON (a store row, a bus message)
Body = Annotated[
    bytes,
    BeforeValidator(_to_bytes),
    PlainSerializer(_b64, return_type=str, when_used="json"),
    Field(max_length=MAX_BODY),
]


def rank(state: str) -> int:
    """A state's place in recorded → submitted → answered → done."""
    return ("recorded", "submitted", "answered", "done").index(state)


class IntakeRow(BaseModel):
    """One delivery of one route, as recorded before the sender got its 2xx."""

    model_config = ConfigDict(extra="forbid")

    route: str = Field(pattern=ROUTE)
    delivery_id: str = Field(min_length=1, max_length=ID_MAX)
    dedupe_key: str = Field(min_length=1, max_length=ID_MAX)
    turn_id: str = Field(min_length=1, max_length=128)
    received_at: AwareDatetime
    client: str = Field(default="", max_length=256)
    origin: Origin = "sender"
    replay_of: str = Field(default="", max_length=ID_MAX)
    headers: dict[str, str] = Field(default_factory=dict)  # the kept ones only, never auth/signatures
    body: Body = b""
    body_sha256: str = ""
    state: IntakeState = "recorded"
    termination_reason: str = Field(default="", max_length=REASON_MAX)
    answer_chars: int = Field(default=0, ge=0)
    delivery: Delivery = ""
    delivery_reason: str = Field(default="", max_length=REASON_MAX)
    updated_at: AwareDatetime | None = None

    @property
    def open(self) -> bool:
        """Still in the route's queue (recorded or submitted)."""
        return self.state in OPEN_STATES


class RecordResult(BaseModel):
    """What ``record`` answers: the new row (neither flag), the fresh earlier intake of the same delivery
    (``replayed``: nothing written), or ``full`` (the route's queue is at its bound: nothing written, no
    row). ``open``: the route's open intakes after the decision."""

    row: IntakeRow | None = None
    replayed: bool = False
    full: bool = False
    open: int = 0


class IntakeCounts(BaseModel):
    """Rows per route and state (``{route: {state: n}}``), and each route's open count."""

    routes: dict[str, dict[str, int]] = Field(default_factory=dict)
    open: dict[str, int] = Field(default_factory=dict)


class IntakePage(BaseModel):
    """A page of rows; ``next_after`` (the key to pass as ``after``) when more follow."""

    rows: list[IntakeRow] = Field(default_factory=list)
    next_after: str | None = None


class IntakeConflict(Conflict):
    """A write the intake table refuses (an unknown intake, a state step backwards with different
    content). Its message starts with ``tag`` so the name survives the wire (:func:`named_intake`)."""

    tag = "intake_conflict"

    def __init__(self, message: str) -> None:
        super().__init__(message if message.startswith(f"{self.tag}: ") else f"{self.tag}: {message}")


class StoreFull(Unavailable):
    """The record store's map is full at its configured maximum: nothing of the write was recorded (an
    HTTP sender gets 503 with Retry-After, never a 2xx)."""

    tag = "store_full"

    def __init__(self, message: str) -> None:
        super().__init__(message if message.startswith(f"{self.tag}: ") else f"{self.tag}: {message}")


def utc_key(at: datetime) -> str:
    """A sortable text of an aware instant (microseconds, UTC) for index keys."""
    return f"{int(at.timestamp() * 1_000_000):020d}"
