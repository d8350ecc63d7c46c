"""What the scheduler driver needs from the world, as protocols: the occurrence ledger (a
:class:`geode.records.schedule_client.LedgerClient`), lanes (submit a job's turn, learn it ended) and a chat
(post the reply with a receipt). The scheduler child implements them over the bus; tests with fakes."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, Literal, Protocol

from pydantic import BaseModel

from geode.records.schedule_models import (
    ClaimResult,
    Decided,
    Ended,
    JobCursor,
    JobEntry,
    MissedRange,
    OccurrenceRow,
    OutcomeResult,
    Runs,
    Stamped,
)
from geode.schedule.jobs import Job
from geode.schedule.occurrences import OccurrenceId
from geode.schedule.outcomes import Delivering, DeliveryFailed, Done, Missed, Skipped, Uncertain


class Ledger(Protocol):
    """The ledger calls the driver makes (every write idempotent for its caller)."""

    def claim(self, occ: OccurrenceId, *, holder: str, lease_s: float = 30.0) -> ClaimResult: ...

    def due(self, occ: OccurrenceId, *, holder: str, lease_s: float = 30.0) -> OccurrenceRow: ...

    def submitted(self, occ: OccurrenceId, at: datetime | None = None) -> OccurrenceRow: ...

    def decide(
        self, jobs: list[tuple[str, Missed | None, list[datetime]]], *, holder: str, lease_s: float = 30.0
    ) -> list[Decided]: ...

    def outcome_many(
        self,
        items: Sequence[
            tuple[OccurrenceId, Delivering | Done | DeliveryFailed | Uncertain | Skipped, str, int | None]
        ],
    ) -> list[Ended]: ...

    def submitted_many(self, occs: list[OccurrenceId], at: datetime | None = None) -> list[Stamped]: ...

    def outcome(
        self,
        occ: OccurrenceId,
        outcome: Delivering | Done | DeliveryFailed | Uncertain | Skipped,
        *,
        by: str = "",
        disable_after: int | None = None,
    ) -> OutcomeResult: ...

    def missed(self, job_id: str, missed: Missed, *, by: str = "") -> MissedRange: ...

    def open_occurrences(self) -> list[OccurrenceRow]: ...

    def occurrence(self, occ: OccurrenceId) -> OccurrenceRow | None: ...

    def runs(self, job_id: str | None = None, *, limit: int = 200) -> Runs: ...

    def put_job(
        self,
        job_id: str,
        definition: dict[str, Any],
        *,
        expect_revision: int | None = None,
        created_at: datetime | None = None,
    ) -> JobEntry: ...

    def remove_job(self, job_id: str) -> bool: ...

    def jobs(self) -> list[JobEntry]: ...

    def set_job_state(
        self,
        job_id: str,
        *,
        paused: bool | None = None,
        disabled: bool | None = None,
        reason: str = "",
        reset_failures: bool = False,
    ) -> JobCursor: ...


class TurnEnd(BaseModel):
    """A job's turn that ended: its termination reason and the answer (``""``: none)."""

    termination_reason: str
    text: str = ""


class Turns(Protocol):
    """Lanes, as the driver sees it."""

    def submit(self, job: Job, row: OccurrenceRow) -> None:
        """Submit the occurrence's turn (``row.turn_id``: lanes admits a repeated id once); raises a
        ``GeodeError`` when lanes did not acknowledge it (the driver tries again next tick)."""
        ...

    def ended(self, turn_id: str) -> TurnEnd | None:
        """The turn's end once it ended; None while it is queued or running (or unknown)."""
        ...


class Delivery(BaseModel):
    """What a reply's post came to. posted: posted now or by an earlier attempt; uncertain: an earlier
    attempt's receipt is uncertain; refused: the chat refused it permanently; deferred: not posted yet (try
    again later)."""

    state: Literal["posted", "uncertain", "refused", "deferred"]
    reason: str = ""


class Reconciled(BaseModel):
    """An uncertain reply receipt, reconciled: whether the reply was posted, and who said so."""

    posted: bool
    by: Literal["operator", "observation"]


class Chat(Protocol):
    """The receipted post of a reply (the executor's ``messenger.deliver``)."""

    def post(self, job: Job, row: OccurrenceRow, text: str, *, operation_id: str) -> Delivery:
        """Post ``text`` to ``job``'s delivery chat once per ``operation_id`` (for ``row``'s turn)."""
        ...

    def reconciled(self, operation_id: str) -> Reconciled | None:
        """The reply receipt's reconciliation (by an operator or by observation), None while it has none."""
        ...
