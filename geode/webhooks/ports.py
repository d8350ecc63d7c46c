"""What the webhooks HTTP app (:mod:`geode.webhooks.http_app`) needs from the webhooks child, as a protocol:
record an intake durably (the store's intake table), say a new intake was recorded (the runner submits its
turn), and read a turn's status for its status url. The child implements it over the bus; tests with a fake.

Calls are blocking: the app runs them in a bounded thread pool, never on its event loop."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal, Protocol

from pydantic import BaseModel, ConfigDict

if TYPE_CHECKING:
    from geode.records.intake_models import IntakeRow, RecordResult
    from geode.webhooks.settings import RouteSpec

Status = Literal["queued", "running", "done"]


class StatusView(BaseModel):
    """What ``GET /status/<turn_id>?token=...`` shows (JSON): never the body, never a header."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    turn_id: str
    route: str
    delivery_id: str
    status: Status
    answer: str | None = None  # the turn's answer once done (None before, or when it has none)
    delivery: str = ""  # "" | "posted" | "refused" | "uncertain" | "none" (the intake row's word)
    termination_reason: str = ""


def status_word(state: str) -> Status:
    """An intake row's state as the status a sender sees: recorded → queued, submitted → running,
    answered / done → done."""
    if state == "recorded":
        return "queued"
    if state == "submitted":
        return "running"
    return "done"


class IntakePort(Protocol):
    """The child's side of the HTTP app. Every method may raise
    :class:`geode.protocol.errors.GeodeError` (the store is unavailable, ...): the app answers 503."""

    def record(
        self, route: RouteSpec, dedupe_key: str, headers: dict[str, str], body: bytes, client: str
    ) -> RecordResult:
        """Record one delivery in ONE store transaction (``IntakeClient.record`` with the route's window and
        queue bound): a fresh intake of (route, dedupe_key) → ``replayed`` with its row; the route's queue
        full → ``full`` (nothing written); else the new row. Idempotent for a retry."""
        ...

    def recorded(self, row: IntakeRow) -> None:
        """A new intake was recorded (called once per 202, before the reply): the runner submits its turn.
        Must not block for long (hand it over to the runner)."""
        ...

    def status(self, turn_id: str) -> StatusView | None:
        """The status of the intake whose turn is ``turn_id`` (None: no such intake)."""
        ...
