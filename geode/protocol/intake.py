"""Messages of the webhook intake table (``store.webhook.*``, served by the store): record a delivery (the
compare-and-set that dedupes it and bounds the route's queue, in one write transaction), move an intake
along recorded → submitted → answered → done, re-run a stored delivery, and the reads behind the webhooks
child and ``geode webhooks``.

Every write is idempotent for its caller: a retried ``record`` carries the same ``attempt`` token and gets
the same answer; a repeated state step is a no-op (states only move forward)."""

from __future__ import annotations

from pydantic import BaseModel, Field

from geode.protocol.catalog import message
from geode.records.intake_models import (
    ID_MAX,
    MAX_BODY,
    REASON_MAX,
    ROUTE,
    Body,
    Delivery,
    IntakeCounts,
    IntakePage,
    IntakeRow,
    Origin,
    RecordResult,
)

Route = Field(pattern=ROUTE)
DeliveryId = Field(min_length=1, max_length=ID_MAX)
MAX_HEADERS = 32
PAGE_ROWS = 200


class RecordIntake(BaseModel):
    """Record one delivery of ``route`` in ONE transaction: a fresh intake of (route, dedupe_key) answers
    ``replayed`` with its row (nothing written); else the route's open intakes ≥ ``queue_max`` answer
    ``full`` (nothing written); else a new row (open + 1). ``window_s``: the dedupe window of a route that
    dedupes by the body's hash (None: a delivery header, fresh until pruned). ``attempt``: the caller's
    token for this one call, reused on its retries (a retry of the call that wrote the row gets it back as
    new, not ``replayed``)."""

    route: str = Route
    dedupe_key: str = Field(min_length=1, max_length=256)
    window_s: float | None = Field(default=None, gt=0)
    queue_max: int = Field(ge=0, le=1_000_000)
    headers: dict[str, str] = Field(default_factory=dict, max_length=MAX_HEADERS)
    body: Body = b""
    client: str = Field(default="", max_length=256)
    origin: Origin = "sender"
    replay_of: str = Field(default="", max_length=ID_MAX)
    attempt: str = Field(default="", max_length=64)


class IntakeRef(BaseModel):
    """One intake: (route, delivery id)."""

    route: str = Route
    delivery_id: str = DeliveryId


class RecordAnswered(IntakeRef):
    """The intake's turn ended (its queue place is freed): why, and how long its answer was."""

    termination_reason: str = Field(default="", max_length=REASON_MAX)
    answer_chars: int = Field(default=0, ge=0)


class RecordDone(IntakeRef):
    """The intake is finished: what became of its answer's delivery (the receipt's word) and why."""

    delivery: Delivery = "none"
    reason: str = Field(default="", max_length=REASON_MAX)


class ReplayIntake(BaseModel):
    """Re-run a stored delivery under a new delivery id ``<old>.replay-<n>`` (origin ``replay``, its body
    and kept headers copied), subject to the route's queue bound. ``route`` "" = the one route holding
    ``delivery_id``."""

    delivery_id: str = DeliveryId
    route: str = Field(default="", pattern=r"^([A-Za-z0-9_.-]{1,64})?$")
    queue_max: int = Field(ge=0, le=1_000_000)
    client: str = Field(default="operator", max_length=256)


class ByTurn(BaseModel):
    """The intake whose turn is ``turn_id``."""

    turn_id: str = Field(min_length=1, max_length=128)


class IntakeReply(BaseModel):
    row: IntakeRow | None = None


class ListOpenIntakes(BaseModel):
    """Intakes not done yet (recorded, submitted, answered), with bodies, a page after ``after``."""

    after: str = Field(default="", max_length=1100)  # a key, hex


class ListRecent(BaseModel):
    """The newest intakes (one route's, or every route's), newest first; bodies only when asked."""

    route: str | None = Field(default=None, pattern=ROUTE)
    limit: int = Field(default=50, ge=1, le=PAGE_ROWS)
    with_body: bool = False


class CountIntakes(BaseModel):
    """Rows per route and state, and each route's open count."""


RECORD = message("store.webhook.record", RecordIntake, RecordResult)
SUBMITTED = message("store.webhook.submitted", IntakeRef, IntakeReply)
ANSWERED = message("store.webhook.answered", RecordAnswered, IntakeReply)
DONE = message("store.webhook.done", RecordDone, IntakeReply)
REPLAY = message("store.webhook.replay", ReplayIntake, RecordResult)
GET = message("store.webhook.get", IntakeRef, IntakeReply)
BY_TURN = message("store.webhook.by_turn", ByTurn, IntakeReply)
OPEN = message("store.webhook.open", ListOpenIntakes, IntakePage)
RECENT = message("store.webhook.recent", ListRecent, IntakePage)
COUNTS = message("store.webhook.counts", CountIntakes, IntakeCounts)

__all__ = ["MAX_BODY", "REASON_MAX"]
