"""Records of the scheduler's occurrence ledger (DESIGN §9): job definitions, per-job cursors, occurrence rows
with exactly one terminal outcome, missed-instant ranges, and what the store's claim (a CAS) answers.

The outcome vocabulary and its transitions are the domain's (:mod:`geode.schedule.outcomes`); this module
only says how the store keeps them."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, Field, ValidationError

from geode.protocol.errors import BadRequest, Conflict
from geode.schedule.occurrences import RUN_NOW, OccurrenceId, utc_text
from geode.schedule.outcomes import TERMINAL, Missed, Outcome, OutcomeKind, kind_of


def occurrence(job_id: str, instant: datetime | None = None, request_id: str | None = None) -> OccurrenceId:
    """The domain's occurrence (a scheduled instant in whole seconds, or a run-now request id); a BadRequest
    naming what is wrong otherwise."""
    try:
        return OccurrenceId(job=job_id, instant=instant, request_id=request_id or None)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise BadRequest(f"not an occurrence of {job_id!r}: {first.get('msg')}"[:300]) from None


def slot(occ: OccurrenceId) -> str:
    """The part of a ledger key after the job: the instant's UTC text (it sorts as it orders) or
    ``now:<request id>`` (after every instant)."""
    return utc_text(occ.instant) if occ.instant is not None else f"{RUN_NOW}{occ.request_id}"


class LedgerConflict(Conflict):
    """A ledger write the occurrence contract refuses. Its message starts with the class's ``tag``, so the
    refusal keeps its name over the wire (``conflict`` is the code): :func:`named` turns it back."""

    tag = "ledger_conflict"

    def __init__(self, message: str) -> None:
        super().__init__(message if message.startswith(f"{self.tag}: ") else f"{self.tag}: {message}")


class OutcomeConflict(LedgerConflict):
    """A second, different terminal outcome for one occurrence, or a step its contract forbids."""

    tag = "outcome_conflict"


class ClaimLost(LedgerConflict):
    """The caller does not hold the occurrence's claim: another scheduler holds it (or took it over)."""

    tag = "claim_lost"


class MissedOverlap(LedgerConflict):
    """A missed range over an instant that already has a row or a range (one outcome per instant)."""

    tag = "missed_overlap"


def named(exc: Conflict) -> Conflict:
    """The ledger refusal a ``conflict`` reply carries (by its tag), or ``exc`` itself."""
    for cls in (OutcomeConflict, ClaimLost, MissedOverlap, LedgerConflict):
        if exc.message.startswith(f"{cls.tag}: "):
            return cls(exc.message)
    return exc


class Step(BaseModel):
    """One outcome an occurrence took, when, and which scheduler incarnation wrote it."""

    outcome: Outcome
    at: datetime
    by: str = ""


class JobRecord(BaseModel):
    """A job definition as the scheduler (its single logical writer) stored it; the store keeps it opaque."""

    job_id: str
    definition: dict[str, Any] = Field(default_factory=dict)  # the scheduler's job model, redacted
    revision: int = 1  # +1 per changed definition (a compare-and-set guard for writers)
    created_at: datetime  # the stored creation instant: the anchor of an ``every`` job, kept across updates
    updated_at: datetime


class JobCursor(BaseModel):
    """Where a job's schedule stands: the last instant decided (due, skipped or the end of a missed range)."""

    job_id: str
    last_instant: datetime | None = None
    consecutive_failures: int = 0
    disabled: bool = False
    disabled_reason: str = ""
    paused: bool = False
    updated_at: datetime | None = None


class JobEntry(BaseModel):
    job: JobRecord | None = None  # None: a cursor whose job was removed (its runs stay until retention)
    cursor: JobCursor


class ClaimKind(StrEnum):
    CLAIMED = (
        "claimed"  # yours (new, renewed, or taken over from an expired lease before it was due): fire it
    )
    FOLLOW = (
        "follow"  # already due (by you, or under a lease that expired): yours to follow, never to re-fire
    )
    HELD = "held"  # another scheduler's live lease: leave it
    DECIDED = "decided"  # it has a terminal outcome, or lies in a missed range: nothing to do


class OccurrenceRow(BaseModel):
    """One occurrence (job, instant or run-now request): claimed (no steps yet), then the domain's outcomes,
    oldest first. ``occurrence_id`` and ``turn_id`` are the domain's functions of it (the store derives
    them)."""

    job_id: str
    instant: datetime | None = None
    request_id: str = ""  # a run-now's request id (then no instant)
    occurrence_id: str
    turn_id: str
    holder: str = ""  # the scheduler incarnation holding the claim
    lease_until: datetime | None = None
    claimed_at: datetime
    submitted_at: datetime | None = None  # lanes acknowledged the durable submit (lag = this - instant)
    history: list[Step] = Field(default_factory=list)

    @property
    def outcome(self) -> Outcome | None:
        return self.history[-1].outcome if self.history else None

    @property
    def kind(self) -> OutcomeKind | None:
        return kind_of(self.outcome)

    @property
    def terminal(self) -> bool:
        return self.kind in TERMINAL

    def lag_s(self) -> float | None:
        """Instant → lanes acknowledged the durable submit (a run-now: from its claim)."""
        if self.submitted_at is None:
            return None
        return (self.submitted_at - (self.instant or self.claimed_at)).total_seconds()


class MissedRange(BaseModel):
    """The instants of one downtime window a job's catch-up policy did not run: one row, not one each."""

    job_id: str
    missed: Missed
    recorded_at: datetime
    by: str = ""


class ClaimResult(BaseModel):
    kind: ClaimKind
    row: OccurrenceRow | None = None

    @property
    def fire(self) -> bool:
        """True when the caller may record it due and submit its turn (nobody recorded it due before)."""
        return self.kind == ClaimKind.CLAIMED


class OutcomeResult(BaseModel):
    """An outcome write: the row, the job's cursor after it, and whether this write disabled the job."""

    row: OccurrenceRow
    cursor: JobCursor | None = None
    changed: bool = True  # False: an identical repeat (nothing written)
    disabled_now: bool = False  # the failure backoff disabled the job with this outcome: say so in its chat


class Runs(BaseModel):
    """Occurrence rows and missed ranges, newest instant first."""

    occurrences: list[OccurrenceRow] = Field(default_factory=list)
    missed: list[MissedRange] = Field(default_factory=list)
    truncated: bool = False


class Fired(BaseModel):
    """One instant of a batched decision: its claim (``claimed``: recorded due in the same transaction, the
    row is the due row), or the named refusal's message (``error``) that left it as it was."""

    claim: ClaimResult | None = None
    error: str = ""


class Decided(BaseModel):
    """One job's part of a batched decision: its missed range (or the refusal), then each instant."""

    job_id: str
    missed: MissedRange | None = None
    missed_error: str = ""
    fired: list[Fired] = Field(default_factory=list)


class DecidedMany(BaseModel):
    jobs: list[Decided] = Field(default_factory=list)


class Stamped(BaseModel):
    """One occurrence of a batched ``submitted``: its row, or the named refusal's message."""

    row: OccurrenceRow | None = None
    error: str = ""


class Ended(BaseModel):
    """One occurrence of a batched outcome write: its result, or the named refusal's message."""

    result: OutcomeResult | None = None
    error: str = ""


class EndedMany(BaseModel):
    results: list[Ended] = Field(default_factory=list)


class StampedMany(BaseModel):
    rows: list[Stamped] = Field(default_factory=list)
