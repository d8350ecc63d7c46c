"""Reading and pruning the occurrence ledger: jobs with their cursors, an occurrence, the runs of a job (rows
and missed ranges, newest first), and retention (terminal rows past ``schedule_retention_days`` or beyond the
newest ``schedule_keep_per_job`` of a job). Reads take any read transaction (the store's or a reader's)."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from geode.records.lmdb_env import Txn, key, prefix, scan_prefix, unpack
from geode.records.schedule_models import (
    JobCursor,
    JobEntry,
    JobRecord,
    MissedRange,
    OccurrenceRow,
    Runs,
    slot,
)
from geode.schedule.occurrences import OccurrenceId

JOBS, CURSORS, OCCURRENCES, MISSED, OPEN = "sj_jobs", "sj_cursor", "sj_occ", "sj_missed", "sj_open"
Dbs = dict[str, Any]  # sub-database name -> handle (absent in a store written before the ledger existed)


def jobs(txn: Txn, dbs: Dbs) -> list[JobEntry]:
    """Every job with its cursor (and every cursor whose job was removed), by job id."""
    if JOBS not in dbs:
        return []
    out: dict[str, JobEntry] = {}
    for _k, v in txn.cursor(db=dbs[JOBS]):
        job = JobRecord.model_validate(unpack(v))
        out[job.job_id] = JobEntry(job=job, cursor=JobCursor(job_id=job.job_id))
    for _k, v in txn.cursor(db=dbs[CURSORS]):
        cursor = JobCursor.model_validate(unpack(v))
        entry = out.get(cursor.job_id)
        out[cursor.job_id] = JobEntry(job=entry.job if entry else None, cursor=cursor)
    return [out[k] for k in sorted(out)]


def occurrence(txn: Txn, dbs: Dbs, occ: OccurrenceId) -> OccurrenceRow | None:
    if OCCURRENCES not in dbs:
        return None
    raw = txn.get(key(occ.job, slot(occ)), db=dbs[OCCURRENCES])
    return OccurrenceRow.model_validate(unpack(raw)) if raw else None


def open_rows(txn: Txn, dbs: Dbs) -> list[OccurrenceRow]:
    """Every occurrence not decided yet (claimed, due, delivering), through the open index: what a
    scheduler starting up follows to its outcome."""
    if OPEN not in dbs:
        return []
    out = []
    for k, _v in txn.cursor(db=dbs[OPEN]):
        raw = txn.get(k, db=dbs[OCCURRENCES])
        if raw:
            out.append(OccurrenceRow.model_validate(unpack(raw)))
    return out


def runs(txn: Txn, dbs: Dbs, job_id: str | None, limit: int) -> Runs:
    """The newest ``limit`` occurrence rows and the newest ``limit`` missed ranges (of one job, or all)."""
    if OCCURRENCES not in dbs:
        return Runs()

    def scan(db: Any) -> Any:
        return scan_prefix(txn, db, prefix(job_id)) if job_id else txn.cursor(db=db)

    rows = [OccurrenceRow.model_validate(unpack(v)) for _k, v in scan(dbs[OCCURRENCES])]
    ranges = [MissedRange.model_validate(unpack(v)) for _k, v in scan(dbs[MISSED])]
    rows.sort(key=lambda r: (r.instant or r.claimed_at, r.job_id), reverse=True)
    ranges.sort(key=lambda r: (r.missed.last, r.job_id), reverse=True)
    more = len(rows) > limit or len(ranges) > limit
    return Runs(occurrences=rows[:limit], missed=ranges[:limit], truncated=more)


def prune(txn: Txn, dbs: Dbs, now: datetime, *, retention_days: float, keep_per_job: int) -> int:
    """Drop terminal occurrence rows and missed ranges decided before ``now - retention_days``, and those
    beyond the newest ``keep_per_job`` of their job. Rows still running (claimed, due, delivering) stay."""
    cutoff = now - timedelta(days=retention_days)
    dropped = 0
    for db, decided in ((dbs[OCCURRENCES], _row_decided), (dbs[MISSED], _range_decided)):
        by_job: dict[bytes, list[tuple[bytes, datetime]]] = {}
        for k, v in txn.cursor(db=db):
            at = decided(unpack(v))
            if at is not None:
                by_job.setdefault(k.split(b"\x00", 1)[0], []).append((k, at))
        for rows in by_job.values():  # in key order: oldest instant first (then run-nows)
            extra = len(rows) - keep_per_job
            for i, (k, at) in enumerate(rows):
                if i < extra or at < cutoff:
                    txn.delete(k, db=db)
                    dropped += 1
    return dropped


def _row_decided(raw: dict[str, Any]) -> datetime | None:
    row = OccurrenceRow.model_validate(raw)
    return row.history[-1].at if row.terminal else None


def _range_decided(raw: dict[str, Any]) -> datetime | None:
    return MissedRange.model_validate(raw).recorded_at
