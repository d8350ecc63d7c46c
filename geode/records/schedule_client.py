"""LedgerClient: the scheduler's typed calls to the occurrence ledger (``store.schedule.*``) over any
Transport, with the store client's retries (every ledger write is idempotent for its caller)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from geode.protocol import ledger as m
from geode.protocol.errors import Conflict
from geode.records.schedule_models import (
    ClaimResult,
    Decided,
    DecidedMany,
    Ended,
    EndedMany,
    JobCursor,
    JobEntry,
    MissedRange,
    OccurrenceRow,
    OutcomeResult,
    Runs,
    Stamped,
    StampedMany,
    named,
)
from geode.records.store_client import StoreClient
from geode.schedule.occurrences import OccurrenceId
from geode.schedule.outcomes import Delivering, DeliveryFailed, Done, Missed, Skipped, Uncertain


def _where(occ: OccurrenceId) -> dict[str, Any]:
    return {"job_id": occ.job, "instant": occ.instant, "request_id": occ.request_id}


class LedgerClient(StoreClient):
    """A :class:`StoreClient` with the ledger's calls. ``holder`` names this scheduler process (unique
    among every scheduler that may share the store: e.g. ``scheduler#3:<pid>:<random>``)."""

    def _ledger(self, type_: str, body: Any) -> dict[str, Any]:
        try:
            return self._call(type_, body)
        except Conflict as exc:
            raise named(exc) from None

    def claim(self, occ: OccurrenceId, *, holder: str, lease_s: float = 30.0) -> ClaimResult:
        body = m.ClaimOccurrence(**_where(occ), holder=holder, lease_s=lease_s)
        return ClaimResult.model_validate(self._ledger(m.CLAIM, body))

    def due(self, occ: OccurrenceId, *, holder: str, lease_s: float = 30.0) -> OccurrenceRow:
        body = m.RecordDue(**_where(occ), holder=holder, lease_s=lease_s)
        return _row(self._ledger(m.DUE, body))

    def decide(
        self,
        jobs: list[tuple[str, Missed | None, list[datetime]]],
        *,
        holder: str,
        lease_s: float = 30.0,
    ) -> list[Decided]:
        """Several jobs' missed ranges, claims and dues, one write transaction per ``BATCH_JOBS`` jobs."""
        out: list[Decided] = []
        for i in range(0, len(jobs), m.BATCH_JOBS):
            part = [
                m.JobDecision(job_id=j, missed=mis, instants=ins)
                for j, mis, ins in jobs[i : i + m.BATCH_JOBS]
            ]
            body = m.DecideMany(holder=holder, lease_s=lease_s, jobs=part)
            out += DecidedMany.model_validate(self._ledger(m.DECIDE, body)).jobs
        return out

    def submitted_many(self, occs: list[OccurrenceId], at: datetime | None = None) -> list[Stamped]:
        """:meth:`submitted` for several occurrences, one write transaction per ``BATCH_JOBS`` of them."""
        out: list[Stamped] = []
        for i in range(0, len(occs), m.BATCH_JOBS):
            part = [m.Occurrence(**_where(o)) for o in occs[i : i + m.BATCH_JOBS]]
            body = m.SubmittedMany(occurrences=part, at=at)
            out += StampedMany.model_validate(self._ledger(m.SUBMITTED_MANY, body)).rows
        return out

    def outcome_many(
        self,
        items: Sequence[
            tuple[OccurrenceId, Delivering | Done | DeliveryFailed | Uncertain | Skipped, str, int | None]
        ],
    ) -> list[Ended]:
        """:meth:`outcome` for several (occurrence, outcome, by, disable_after), one transaction per
        ``BATCH_JOBS``; each refusal is its own (``Ended.error``)."""
        out: list[Ended] = []
        for i in range(0, len(items), m.BATCH_JOBS):
            part = [
                m.RecordOutcome(**_where(o), outcome=oc, by=by, disable_after=lim)
                for o, oc, by, lim in items[i : i + m.BATCH_JOBS]
            ]
            out += EndedMany.model_validate(
                self._ledger(m.OUTCOME_MANY, m.OutcomeMany(outcomes=part))
            ).results
        return out

    def submitted(self, occ: OccurrenceId, at: datetime | None = None) -> OccurrenceRow:
        return _row(self._ledger(m.SUBMITTED, m.RecordSubmitted(**_where(occ), at=at)))

    def outcome(
        self,
        occ: OccurrenceId,
        outcome: Delivering | Done | DeliveryFailed | Uncertain | Skipped,
        *,
        by: str = "",
        disable_after: int | None = None,
    ) -> OutcomeResult:
        body = m.RecordOutcome(**_where(occ), outcome=outcome, by=by, disable_after=disable_after)
        return OutcomeResult.model_validate(self._ledger(m.OUTCOME, body))

    def missed(self, job_id: str, missed: Missed, *, by: str = "") -> MissedRange:
        reply = self._ledger(m.MISSED, m.RecordMissed(job_id=job_id, missed=missed, by=by))
        return m.MissedReply.model_validate(reply).range

    def occurrence(self, occ: OccurrenceId) -> OccurrenceRow | None:
        return m.OccurrenceReply.model_validate(self._ledger(m.GET, m.Occurrence(**_where(occ)))).row

    def runs(self, job_id: str | None = None, *, limit: int = 200) -> Runs:
        return Runs.model_validate(self._ledger(m.RUNS, m.ListRuns(job_id=job_id, limit=limit)))

    def put_job(
        self,
        job_id: str,
        definition: dict[str, Any],
        *,
        expect_revision: int | None = None,
        created_at: datetime | None = None,
    ) -> JobEntry:
        body = m.PutJob(
            job_id=job_id, definition=definition, expect_revision=expect_revision, created_at=created_at
        )
        return m.JobReply.model_validate(self._ledger(m.JOB_PUT, body)).entry

    def remove_job(self, job_id: str) -> bool:
        return m.RemoveReply.model_validate(self._ledger(m.JOB_REMOVE, m.RemoveJob(job_id=job_id))).removed

    def set_job_state(
        self,
        job_id: str,
        *,
        paused: bool | None = None,
        disabled: bool | None = None,
        reason: str = "",
        reset_failures: bool = False,
    ) -> JobCursor:
        body = m.SetJobState(
            job_id=job_id, paused=paused, disabled=disabled, reason=reason, reset_failures=reset_failures
        )
        return m.CursorReply.model_validate(self._ledger(m.JOB_STATE, body)).cursor

    def open_occurrences(self) -> list[OccurrenceRow]:
        """Every occurrence not decided yet (claimed, due, delivering): what to follow after a restart."""
        return m.OpenRows.model_validate(self._ledger(m.OPEN, m.ListOpen())).occurrences

    def jobs(self) -> list[JobEntry]:
        return m.JobList.model_validate(self._ledger(m.JOBS, m.ListJobs())).jobs


def _row(reply: dict[str, Any]) -> OccurrenceRow:
    row = m.OccurrenceReply.model_validate(reply).row
    assert row is not None  # due and submitted always answer with the row
    return row
