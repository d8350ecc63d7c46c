"""The job side of the occurrence ledger: job definitions (the scheduler is their single logical writer),
per-job cursors (pause, disable, failure count), the ledger's reads and its retention. See
:mod:`geode.records.schedule_ledger` for the occurrences."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from geode.protocol.errors import Conflict, NotFound
from geode.protocol.later import Later
from geode.records import schedule_views as views
from geode.records.clocked_table import ClockedTable
from geode.records.lmdb_env import Txn, key, pack, unpack
from geode.records.schedule_models import JobCursor, JobEntry, JobRecord, OccurrenceRow, Runs
from geode.records.schedule_views import CURSORS, JOBS, MISSED, OCCURRENCES, OPEN
from geode.redaction import redact, redact_text
from geode.schedule.occurrences import OccurrenceId
from geode.schedule.outcomes import REASON_MAX


class JobTable(ClockedTable):
    """Jobs, cursors, reads and retention. ``clock`` (seconds since the epoch) judges leases and stamps
    rows; tests replace it."""

    def _dbs(self) -> views.Dbs:
        out: views.Dbs = {}
        for name in (JOBS, CURSORS, OCCURRENCES, MISSED, OPEN):
            try:
                out[name] = self.renv.db(name)
            except KeyError:  # a read-only handle on a store written before the ledger existed
                pass
        return out

    # reads ------------------------------------------------------------------------------------------
    def jobs(self) -> list[JobEntry]:
        with self.renv.read() as txn:
            return views.jobs(txn, self._dbs())

    def occurrence(self, occ: OccurrenceId) -> OccurrenceRow | None:
        with self.renv.read() as txn:
            return views.occurrence(txn, self._dbs(), occ)

    def open_rows(self) -> list[OccurrenceRow]:
        with self.renv.read() as txn:
            return views.open_rows(txn, self._dbs())

    def runs(self, job_id: str | None = None, *, limit: int = 200) -> Runs:
        with self.renv.read() as txn:
            return views.runs(txn, self._dbs(), job_id, limit)

    def prune(self) -> int:
        """Apply the ledger's retention (``schedule_retention_days``, ``schedule_keep_per_job``) now."""
        cfg = self.config
        return int(
            self.writer.run(
                lambda txn: views.prune(
                    txn,
                    self._dbs(),
                    self.now(),
                    retention_days=cfg.schedule_retention_days,
                    keep_per_job=cfg.schedule_keep_per_job,
                )
            )
        )

    def _cursor(self, txn: Txn, job_id: str) -> JobCursor:
        raw = txn.get(key(job_id), db=self._db(CURSORS))
        return JobCursor.model_validate(unpack(raw)) if raw else JobCursor(job_id=job_id)

    def _put_cursor(self, txn: Txn, cursor: JobCursor) -> JobCursor:
        cursor = cursor.model_copy(update={"updated_at": self.now()})
        txn.put(key(cursor.job_id), pack(cursor.model_dump(mode="json")), db=self._db(CURSORS))
        return cursor

    # jobs -------------------------------------------------------------------------------------------
    def put_job_later(
        self,
        job_id: str,
        definition: dict[str, Any],
        *,
        expect_revision: int | None = None,
        created_at: datetime | None = None,
    ) -> Later:
        """Store a definition (redacted); ``expect_revision`` guards against a writer working from a stale
        one. The same definition again is a no-op whatever the revision (a retried request). ``created_at``
        (the scheduler's clock; the store's when None) is kept from the first definition on."""
        return self.writer.submit(
            lambda txn: self._put_job(txn, job_id, definition, expect_revision, created_at)
        )

    def _put_job(
        self,
        txn: Txn,
        job_id: str,
        definition: dict[str, Any],
        expect: int | None,
        created_at: datetime | None,
    ) -> JobEntry:
        clean = redact(definition)
        raw = txn.get(key(job_id), db=self._db(JOBS))
        old = JobRecord.model_validate(unpack(raw)) if raw else None
        now = self.now()
        if old is not None and old.definition == clean:
            return JobEntry(job=old, cursor=self._cursor(txn, job_id))
        have = old.revision if old else 0
        if expect is not None and expect != have:
            raise Conflict(f"job {job_id} is at revision {have}, not {expect}: re-read it before changing it")
        job = JobRecord(
            job_id=job_id,
            definition=clean if isinstance(clean, dict) else {"value": clean},
            revision=have + 1,
            created_at=old.created_at if old else (created_at or now),
            updated_at=now,
        )
        txn.put(key(job_id), pack(job.model_dump(mode="json")), db=self._db(JOBS))
        return JobEntry(job=job, cursor=self._cursor(txn, job_id))

    def remove_job_later(self, job_id: str) -> Later:
        """Drop a definition; False when there was none. Its cursor and runs stay (the instants it decided
        stay decided if a job of that id comes back; runs go by retention)."""
        return self.writer.submit(lambda txn: bool(txn.delete(key(job_id), db=self._db(JOBS))))

    def set_state_later(
        self, job_id: str, *, paused: bool | None, disabled: bool | None, reason: str, reset_failures: bool
    ) -> Later:
        """Pause/resume, disable/enable a job, or reset its failure count: the new :class:`JobCursor`."""

        def apply(txn: Txn) -> JobCursor:
            if txn.get(key(job_id), db=self._db(JOBS)) is None:
                raise NotFound(f"no job {job_id}")
            update: dict[str, Any] = {}
            if paused is not None:
                update["paused"] = paused
            if disabled is not None:
                update |= {
                    "disabled": disabled,
                    "disabled_reason": redact_text(reason, REASON_MAX) if disabled else "",
                }
            if reset_failures:
                update["consecutive_failures"] = 0
            return self._put_cursor(txn, self._cursor(txn, job_id).model_copy(update=update))

        return self.writer.submit(apply)
