"""The store's routes for the occurrence ledger (``store.schedule.*``): writes reply after their group commit
(deferred, inline like the other plain writes), reads answer from a read transaction."""

from __future__ import annotations

from pydantic import BaseModel

from geode.protocol import ledger as m
from geode.protocol.dispatch import Handler, LaterHandler
from geode.protocol.later import Later
from geode.protocol.transport import Request
from geode.records.schedule_ledger import ScheduleLedger
from geode.records.schedule_models import occurrence
from geode.schedule.occurrences import OccurrenceId


def _occ(b: m.Occurrence) -> OccurrenceId:
    return occurrence(b.job_id, b.instant, b.request_id)


class LedgerRoutes:
    """``plain`` (reads) and ``deferred`` (writes) for :class:`geode.protocol.dispatch.Dispatch`."""

    def __init__(self, ledger: ScheduleLedger) -> None:
        self.ledger = ledger
        self.plain: dict[str, Handler] = {
            m.GET: self._get,
            m.RUNS: self._runs,
            m.JOBS: self._jobs,
            m.OPEN: lambda b, r: m.OpenRows(occurrences=self.ledger.open_rows()),
        }
        self.deferred: dict[str, LaterHandler] = {
            m.CLAIM: self._claim,
            m.DUE: self._due,
            m.SUBMITTED: self._submitted,
            m.OUTCOME: self._outcome,
            m.MISSED: self._missed,
            m.DECIDE: self._decide,
            m.SUBMITTED_MANY: self._submitted_many,
            m.OUTCOME_MANY: self._outcome_many,
            m.JOB_PUT: self._put_job,
            m.JOB_REMOVE: self._remove_job,
            m.JOB_STATE: self._set_state,
        }

    # writes -----------------------------------------------------------------------------------------
    def _claim(self, b: m.ClaimOccurrence, r: Request) -> Later:
        return self.ledger.claim_later(_occ(b), holder=b.holder, lease_s=b.lease_s)

    def _due(self, b: m.RecordDue, r: Request) -> Later:
        later = self.ledger.due_later(_occ(b), holder=b.holder, lease_s=b.lease_s)
        return later.map(lambda row: m.OccurrenceReply(row=row))

    def _submitted(self, b: m.RecordSubmitted, r: Request) -> Later:
        return self.ledger.submitted_later(_occ(b), b.at).map(lambda row: m.OccurrenceReply(row=row))

    def _outcome(self, b: m.RecordOutcome, r: Request) -> Later:
        return self.ledger.outcome_later(_occ(b), b.outcome, by=b.by, disable_after=b.disable_after)

    def _missed(self, b: m.RecordMissed, r: Request) -> Later:
        later = self.ledger.missed_later(b.job_id, b.missed, by=b.by)
        return later.map(lambda rng: m.MissedReply(range=rng))

    def _decide(self, b: m.DecideMany, r: Request) -> Later:
        jobs = [(j.job_id, j.missed, list(j.instants)) for j in b.jobs]
        return self.ledger.decide_later(jobs, holder=b.holder, lease_s=b.lease_s)

    def _submitted_many(self, b: m.SubmittedMany, r: Request) -> Later:
        return self.ledger.submitted_many_later([_occ(o) for o in b.occurrences], b.at)

    def _outcome_many(self, b: m.OutcomeMany, r: Request) -> Later:
        items = [(_occ(o), o.outcome, o.by, o.disable_after) for o in b.outcomes]
        return self.ledger.outcome_many_later(items)

    def _put_job(self, b: m.PutJob, r: Request) -> Later:
        later = self.ledger.put_job_later(
            b.job_id, b.definition, expect_revision=b.expect_revision, created_at=b.created_at
        )
        return later.map(lambda entry: m.JobReply(entry=entry))

    def _remove_job(self, b: m.RemoveJob, r: Request) -> Later:
        return self.ledger.remove_job_later(b.job_id).map(lambda gone: m.RemoveReply(removed=gone))

    def _set_state(self, b: m.SetJobState, r: Request) -> Later:
        later = self.ledger.set_state_later(
            b.job_id, paused=b.paused, disabled=b.disabled, reason=b.reason, reset_failures=b.reset_failures
        )
        return later.map(lambda cursor: m.CursorReply(cursor=cursor))

    # reads ------------------------------------------------------------------------------------------
    def _get(self, b: m.Occurrence, r: Request) -> BaseModel:
        return m.OccurrenceReply(row=self.ledger.occurrence(_occ(b)))

    def _runs(self, b: m.ListRuns, r: Request) -> BaseModel:
        return self.ledger.runs(b.job_id, limit=b.limit)

    def _jobs(self, b: m.ListJobs, r: Request) -> BaseModel:
        return m.JobList(jobs=self.ledger.jobs())
