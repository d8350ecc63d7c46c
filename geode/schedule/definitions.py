"""The scheduler's job definitions, of which it is the single logical writer: define (add or change), remove,
pause/resume and run-now, mixed into :class:`geode.schedule.driver.Driver`; :class:`JobState` is a job as the
driver holds it."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from geode.records.schedule_models import JobCursor, JobRecord, OccurrenceRow
from geode.schedule.jobs import Job, JobSpec
from geode.schedule.occurrences import OccurrenceId
from geode.schedule.planner import redefine
from geode.schedule.ports import Ledger


@dataclass
class JobState:
    """One job as the driver holds it: the stored job, its cursor, its queued instants (``queue_one``)."""

    job: Job
    cursor: JobCursor
    declarative: bool = False
    bound: datetime | None = None  # instants planned (run, queued, skipped) through here
    queue: list[datetime] = field(default_factory=list)
    anchored: bool = False  # re-anchored by a timing change (the stored definition says where)
    record: JobRecord | None = None  # as stored (definition, revision, creation instant)


class Definitions:
    """The driver's job-definition requests (``geode schedule add|rm|pause|resume|run-now``, reload)."""

    ledger: Ledger
    jobs: dict[str, JobState]

    def now(self) -> datetime:
        raise NotImplementedError

    def fire(self, occ: OccurrenceId) -> tuple[OccurrenceRow | None, bool]:
        raise NotImplementedError

    # --- job definitions (the scheduler is their single logical writer) ---------------------------------
    def define(self, spec: JobSpec, *, declarative: bool) -> JobState:
        """Store ``spec`` (new, or redefined): a new job is anchored now; a job whose timing changed is
        re-anchored now (its due occurrences keep their course, new instants follow the new timing)."""
        from geode.schedule.stored import definition_of, job_of, resumed_at

        now = self.now()
        old = self.jobs.get(spec.name)
        job, _ = redefine(old.job if old is not None else None, spec, None, now)
        retimed = old is not None and job.created_at != old.job.created_at
        anchor = job.created_at if retimed or (old is not None and old.anchored) else None
        resumed = resumed_at(old.record) if old is not None else None
        definition = definition_of(spec, declarative=declarative, anchored_at=anchor, resumed_at=resumed)
        entry = self.ledger.put_job(spec.name, definition, created_at=job.created_at)
        assert entry.job is not None
        stored, declared = job_of(entry.job)
        state = JobState(stored, entry.cursor, declared, bound=old.bound if old is not None else None)
        state.anchored, state.record = stored.created_at != entry.job.created_at, entry.job
        if retimed:
            state.queue = []  # instants of the old timing not started yet are not this job's any more
        self.jobs[spec.name] = state
        return state

    def remove(self, name: str) -> bool:
        """Drop a job definition (its occurrences stay; a due one is followed to its outcome)."""
        removed = self.ledger.remove_job(name)
        self.jobs.pop(name, None)
        return removed

    def set_paused(self, name: str, paused: bool) -> JobState:
        """Pause, or resume (which also re-enables a job the failure backoff disabled)."""
        from geode.schedule.stored import RESUMED

        state = self.jobs[name]
        if paused:
            state.cursor = self.ledger.set_job_state(name, paused=True)
            return state
        if state.record is not None and (state.cursor.paused or state.cursor.disabled):
            # instants while it was paused are not its occurrences: it continues from now (kept in the record)
            definition = {**state.record.definition, RESUMED: self.now().replace(microsecond=0).isoformat()}
            entry = self.ledger.put_job(name, definition)
            state.record = entry.job
        state.cursor = self.ledger.set_job_state(name, paused=False, disabled=False, reset_failures=True)
        return state

    def run_now(self, name: str, request_id: str) -> tuple[OccurrenceRow, bool]:
        """One run of job ``name`` now, once per ``request_id``: the row and whether it is a repeat."""
        occ = OccurrenceId(job=name, request_id=request_id)
        row, new = self.fire(occ)
        if row is None:
            row = self.ledger.occurrence(occ)
        assert row is not None
        return row, not new
