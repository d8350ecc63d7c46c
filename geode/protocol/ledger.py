"""Messages of the occurrence ledger (``store.schedule.*``, served by the store): the scheduler's claims, due
rows, outcomes and missed ranges, its job definitions, and the reads behind ``geode schedule list|runs``.

Every write is idempotent for its caller (a repeated claim renews, a repeated due/outcome/missed range is a
no-op), so a client may retry after a timeout; what the contract forbids is a named ``conflict``.
"""

from __future__ import annotations

from typing import Any

from pydantic import AwareDatetime, BaseModel, Field

from geode.protocol.catalog import message
from geode.records.schedule_models import (
    ClaimResult,
    DecidedMany,
    EndedMany,
    JobCursor,
    JobEntry,
    MissedRange,
    OccurrenceRow,
    OutcomeResult,
    Runs,
    StampedMany,
)
from geode.schedule.occurrences import JOB_NAME, REQUEST_ID
from geode.schedule.outcomes import Delivering, DeliveryFailed, Done, Missed, Skipped, Uncertain

JobId = Field(pattern=f"^{JOB_NAME}$")
Holder = Field(min_length=1, max_length=128)  # one scheduler process: unique across trees sharing a store


class Occurrence(BaseModel):
    """One occurrence: a scheduled ``instant`` (UTC, whole seconds) or a run-now ``request_id``."""

    job_id: str = JobId
    instant: AwareDatetime | None = None
    request_id: str | None = Field(default=None, pattern=f"^{REQUEST_ID}$")


class ClaimOccurrence(Occurrence):
    """Claim an occurrence for ``holder`` (a compare-and-set in one write transaction): ``claimed`` (fire
    it), ``follow`` (due already: never fire again), ``held`` (another live lease) or ``decided``."""

    holder: str = Holder
    lease_s: float = Field(default=30.0, gt=0, le=3600)


class RecordDue(ClaimOccurrence):
    """Record ``due`` and advance the job's cursor to its instant in one transaction (needs the claim)."""


class RecordSubmitted(Occurrence):
    """Lanes acknowledged the occurrence's durable submit at ``at`` (the store's clock when absent)."""

    at: AwareDatetime | None = None


class RecordOutcome(Occurrence):
    """One outcome step (delivering, or a terminal one); a different second terminal outcome is refused
    (``conflict``) unless it follows an uncertain receipt's reconciliation. ``disable_after``: the job's
    failure limit (the failure that reaches it disables the job in the same transaction)."""

    outcome: Delivering | Done | DeliveryFailed | Uncertain | Skipped = Field(discriminator="kind")
    by: str = Field(default="", max_length=128)
    disable_after: int | None = Field(default=None, ge=1, le=1000)


class RecordMissed(BaseModel):
    """One missed range of a job (count, first, last) for one downtime window; the cursor moves to its end."""

    job_id: str = JobId
    missed: Missed
    by: str = Field(default="", max_length=128)


BATCH_JOBS = 100  # jobs (or occurrences) per batched request: its reply stays well under one frame


class JobDecision(BaseModel):
    """One job's part of a tick: its missed range (if any), then its instants to run, in order."""

    job_id: str = JobId
    missed: Missed | None = None
    instants: list[AwareDatetime] = Field(default_factory=list, max_length=1000)


class DecideMany(BaseModel):
    """A tick's decisions for several jobs in ONE write transaction: each job's missed range, then each
    instant claimed (compare-and-set) and, when claimed, recorded due with the cursor moved to it. One job's
    refusal is its own (``Decided.missed_error`` / ``Fired.error``); the others still apply."""

    holder: str = Holder
    lease_s: float = Field(default=30.0, gt=0, le=3600)
    jobs: list[JobDecision] = Field(default_factory=list, max_length=BATCH_JOBS)


class SubmittedMany(BaseModel):
    """Several occurrences' lanes acknowledgements in ONE write transaction (each as ``RecordSubmitted``)."""

    occurrences: list[Occurrence] = Field(default_factory=list, max_length=BATCH_JOBS)
    at: AwareDatetime | None = None


class OutcomeMany(BaseModel):
    """Several outcome steps in ONE write transaction (each a ``RecordOutcome``, refused alone)."""

    outcomes: list[RecordOutcome] = Field(default_factory=list, max_length=BATCH_JOBS)


class OccurrenceReply(BaseModel):
    row: OccurrenceRow | None = None


class MissedReply(BaseModel):
    range: MissedRange


class PutJob(BaseModel):
    """Store a job definition (the scheduler's job model, redacted); the same one again is a no-op."""

    job_id: str = JobId
    definition: dict[str, Any] = Field(default_factory=dict)
    expect_revision: int | None = Field(default=None, ge=0)  # refuse (conflict) when the stored one differs
    created_at: AwareDatetime | None = None  # the scheduler's creation instant (kept from the first put)


class JobReply(BaseModel):
    entry: JobEntry


class RemoveJob(BaseModel):
    """Drop a job definition (its cursor and runs stay)."""

    job_id: str = JobId


class RemoveReply(BaseModel):
    removed: bool


class SetJobState(BaseModel):
    """Pause/resume, disable/enable a job or reset its failure count."""

    job_id: str = JobId
    paused: bool | None = None
    disabled: bool | None = None
    reason: str = Field(default="", max_length=500)
    reset_failures: bool = False


class CursorReply(BaseModel):
    cursor: JobCursor


class ListJobs(BaseModel):
    """Every job definition with its cursor."""


class JobList(BaseModel):
    jobs: list[JobEntry]


class ListRuns(BaseModel):
    """Occurrence rows and missed ranges, newest first (one job's, or every job's)."""

    job_id: str | None = Field(default=None, pattern=f"^{JOB_NAME}$")
    limit: int = Field(default=200, ge=1, le=500)  # rows and ranges each (a reply stays one frame)


class ListOpen(BaseModel):
    """Every occurrence not decided yet (claimed, due or delivering): what a starting scheduler follows."""


class OpenRows(BaseModel):
    occurrences: list[OccurrenceRow]


CLAIM = message("store.schedule.claim", ClaimOccurrence, ClaimResult)
DUE = message("store.schedule.due", RecordDue, OccurrenceReply)
SUBMITTED = message("store.schedule.submitted", RecordSubmitted, OccurrenceReply)
OUTCOME = message("store.schedule.outcome", RecordOutcome, OutcomeResult)
MISSED = message("store.schedule.missed", RecordMissed, MissedReply)
DECIDE = message("store.schedule.decide", DecideMany, DecidedMany)
SUBMITTED_MANY = message("store.schedule.submitted_many", SubmittedMany, StampedMany)
OUTCOME_MANY = message("store.schedule.outcome_many", OutcomeMany, EndedMany)
GET = message("store.schedule.get", Occurrence, OccurrenceReply)
RUNS = message("store.schedule.runs", ListRuns, Runs)
JOB_PUT = message("store.schedule.job.put", PutJob, JobReply)
JOB_REMOVE = message("store.schedule.job.remove", RemoveJob, RemoveReply)
JOB_STATE = message("store.schedule.job.state", SetJobState, CursorReply)
JOBS = message("store.schedule.jobs", ListJobs, JobList)
OPEN = message("store.schedule.open", ListOpen, OpenRows)
