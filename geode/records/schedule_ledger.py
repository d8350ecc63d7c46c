"""The occurrence ledger in the record store: job definitions, cursors, occurrence rows and missed ranges.

Every write is one function run by the single writer in one transaction, so each is a compare-and-set: a
claim of (job, instant) is held by one scheduler incarnation at a time; ``due`` needs the claim and advances
the job's cursor in the same transaction; a terminal outcome is written once (the domain's transitions
decide, :func:`geode.schedule.outcomes.check_transition`); a missed range decides its instants at once.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any, TypeVar

from pydantic import BaseModel

from geode.protocol.errors import GeodeError
from geode.protocol.later import Later
from geode.records.lmdb_env import Txn, key, pack, prefix, scan_prefix, unpack
from geode.records.schedule_jobs import JobTable
from geode.records.schedule_models import (
    ClaimKind,
    ClaimLost,
    ClaimResult,
    Decided,
    DecidedMany,
    Ended,
    EndedMany,
    Fired,
    JobCursor,
    MissedOverlap,
    MissedRange,
    OccurrenceRow,
    OutcomeConflict,
    OutcomeResult,
    Stamped,
    StampedMany,
    Step,
    occurrence,
    slot,
)
from geode.records.schedule_views import MISSED, OCCURRENCES, OPEN
from geode.redaction import redact_text
from geode.schedule.occurrences import OccurrenceId, utc_text
from geode.schedule.outcomes import (
    REASON_MAX,
    Due,
    IllegalTransition,
    Missed,
    Outcome,
    Skipped,
    check_transition,
    counts_as_failure,
)

M = TypeVar("M", bound=BaseModel)


class ScheduleLedger(JobTable):
    """The whole ledger: :class:`JobTable` plus occurrences (claim, due, submitted, outcome, missed)."""

    # rows -------------------------------------------------------------------------------------------
    def _row(self, txn: Txn, occ: OccurrenceId) -> OccurrenceRow | None:
        raw = txn.get(key(occ.job, slot(occ)), db=self._db(OCCURRENCES))
        return OccurrenceRow.model_validate(unpack(raw)) if raw else None

    def _new_row(self, txn: Txn, occ: OccurrenceId, holder: str) -> OccurrenceRow:
        """A fresh row; ``MissedOverlap`` when a missed range already decided the instant."""
        if occ.instant is not None and (rng := self._covering(txn, occ.job, occ.instant)) is not None:
            raise MissedOverlap(f"{occ.text} lies in the missed range {_range(rng)}")
        return OccurrenceRow(
            job_id=occ.job,
            instant=occ.instant,
            request_id=occ.request_id or "",
            occurrence_id=occ.text,
            turn_id=occ.turn_id,
            holder=holder,
            claimed_at=self.now(),
        )

    def _put_row(self, txn: Txn, row: OccurrenceRow) -> OccurrenceRow:
        k = key(row.job_id, slot(occurrence(row.job_id, row.instant, row.request_id)))
        txn.put(k, pack(row.model_dump(mode="json")), db=self._db(OCCURRENCES))
        if row.terminal:
            txn.delete(k, db=self._db(OPEN))
        else:
            txn.put(k, row.holder.encode(), db=self._db(OPEN))
        return row

    def release_later(self, name: str, incarnation: int) -> Later:
        """A child died: the leases of holders named ``<name>#<k>`` (optionally ``:…`` after it), ``k`` ≤
        ``incarnation``, expire now, so its successor claims (or follows) their occurrences at once instead
        of after the lease. How many were released, after the commit."""
        return self.writer.submit(lambda txn: self._release(txn, name, incarnation))

    def _release(self, txn: Txn, name: str, incarnation: int) -> int:
        now, released = self.now(), 0
        for k, v in list(txn.cursor(db=self._db(OPEN))):
            owner, _, inc = v.decode().split(":", 1)[0].rpartition("#")
            if owner != name or not inc.isdigit() or int(inc) > incarnation:
                continue
            raw = txn.get(k, db=self._db(OCCURRENCES))
            if raw is None:
                txn.delete(k, db=self._db(OPEN))
                continue
            row = OccurrenceRow.model_validate(unpack(raw))
            if row.lease_until is None or row.lease_until > now:
                self._put_row(txn, row.model_copy(update={"lease_until": now}))
                released += 1
        return released

    def _advance(self, txn: Txn, job_id: str, instant: datetime) -> JobCursor:
        """The cursor moves forward only: a wall clock jumping back never re-opens a decided instant (and a
        run-now, which has no instant, never moves it)."""
        cursor = self._cursor(txn, job_id)
        if cursor.last_instant is not None and cursor.last_instant >= instant:
            return cursor
        return self._put_cursor(txn, cursor.model_copy(update={"last_instant": instant}))

    def _covering(self, txn: Txn, job_id: str, instant: datetime) -> MissedRange | None:
        """The missed range holding ``instant`` (ranges never overlap: the last one starting at or before)."""
        cur = txn.cursor(db=self._db(MISSED))
        probe = key(job_id, utc_text(instant)) + b"\x00"  # just past a range starting at ``instant``
        found = cur.prev() if cur.set_range(probe) else cur.last()
        if not found or not cur.key().startswith(prefix(job_id)):
            return None
        rng = MissedRange.model_validate(unpack(cur.value()))
        return rng if rng.missed.first <= instant <= rng.missed.last else None

    # claim and due ----------------------------------------------------------------------------------
    def claim_later(self, occ: OccurrenceId, *, holder: str, lease_s: float) -> Later:
        """A compare-and-set on the occurrence for ``holder``: a :class:`ClaimResult` after the commit."""
        return self.writer.submit(lambda txn: self._claim(txn, occ, holder, lease_s))

    def _claim(self, txn: Txn, occ: OccurrenceId, holder: str, lease_s: float) -> ClaimResult:
        now = self.now()
        row = self._row(txn, occ)
        if row is None:
            try:
                row = self._new_row(txn, occ, holder)
            except MissedOverlap:
                return ClaimResult(kind=ClaimKind.DECIDED)
        elif row.terminal:
            return ClaimResult(kind=ClaimKind.DECIDED, row=row)
        elif row.holder != holder and row.lease_until is not None and row.lease_until > now:
            return ClaimResult(kind=ClaimKind.HELD, row=row)
        kind = ClaimKind.CLAIMED if row.kind is None else ClaimKind.FOLLOW
        row = row.model_copy(update={"holder": holder, "lease_until": now + timedelta(seconds=lease_s)})
        return ClaimResult(kind=kind, row=self._put_row(txn, row))

    def due_later(self, occ: OccurrenceId, *, holder: str, lease_s: float) -> Later:
        """Record ``due`` and move the job's cursor to its instant (a run-now: no cursor) in one transaction.
        Needs the claim (or no row at all: claim and due are then one step); a holder's repeat is a no-op."""
        return self.writer.submit(lambda txn: self._due(txn, occ, holder, lease_s))

    def _due(self, txn: Txn, occ: OccurrenceId, holder: str, lease_s: float) -> OccurrenceRow:
        now = self.now()
        row = self._row(txn, occ) or self._new_row(txn, occ, holder)
        if row.terminal:
            raise OutcomeConflict(f"{occ.text} already ended {_said(row)}: it is never due again")
        if row.holder != holder:
            raise ClaimLost(f"{occ.text} is claimed by {row.holder}, not {holder}")
        if row.kind is not None:
            return row  # recorded due already: a retried request
        history = self._follow(row, Due(), holder, now)
        row = row.model_copy(update={"history": history, "lease_until": now + timedelta(seconds=lease_s)})
        if occ.instant is not None:
            self._advance(txn, occ.job, occ.instant)
        return self._put_row(txn, row)

    def decide_later(
        self, jobs: list[tuple[str, Missed | None, list[datetime]]], *, holder: str, lease_s: float
    ) -> Later:
        """A tick's decisions for several jobs in one transaction (a :class:`DecidedMany`): per job its
        missed range, then per instant the claim's compare-and-set and, when claimed, ``due`` with the cursor
        (exactly :meth:`claim_later` then :meth:`due_later`). A refusal is that item's alone: every refusal
        is raised before its item writes anything, so the others still commit."""
        return self.writer.submit(lambda txn: self._decide(txn, jobs, holder, lease_s))

    def _decide(
        self, txn: Txn, jobs: list[tuple[str, Missed | None, list[datetime]]], holder: str, lease_s: float
    ) -> DecidedMany:
        out = DecidedMany()
        for job_id, missed, instants in jobs:
            d = Decided(job_id=job_id)
            if missed is not None:
                try:
                    d.missed = self._missed(txn, job_id, missed, holder)
                except GeodeError as exc:
                    d.missed_error = exc.message
            for instant in instants:
                try:
                    occ = occurrence(job_id, instant)
                    claim = self._claim(txn, occ, holder, lease_s)
                    if claim.kind == ClaimKind.CLAIMED:
                        claim = ClaimResult(kind=claim.kind, row=self._due(txn, occ, holder, lease_s))
                    d.fired.append(Fired(claim=claim))
                except GeodeError as exc:
                    d.fired.append(Fired(error=exc.message))
            out.jobs.append(d)
        return out

    def submitted_many_later(self, occs: list[OccurrenceId], at: datetime | None) -> Later:
        """:meth:`submitted_later` for several occurrences in one transaction (a :class:`StampedMany`)."""
        return self.writer.submit(lambda txn: StampedMany(rows=[self._stamp(txn, o, at) for o in occs]))

    def _stamp(self, txn: Txn, occ: OccurrenceId, at: datetime | None) -> Stamped:
        try:
            return Stamped(row=self._submitted(txn, occ, at))
        except GeodeError as exc:
            return Stamped(error=exc.message)

    def outcome_many_later(self, items: Sequence[tuple[OccurrenceId, Outcome, str, int | None]]) -> Later:
        """:meth:`outcome_later` for several occurrences in one transaction (an :class:`EndedMany`; each
        refusal is raised before its item writes anything, so the others still commit)."""
        return self.writer.submit(lambda txn: EndedMany(results=[self._end(txn, *i) for i in items]))

    def _end(self, txn: Txn, occ: OccurrenceId, outcome: Outcome, by: str, limit: int | None) -> Ended:
        try:
            return Ended(result=self._outcome(txn, occ, outcome, by, limit))
        except GeodeError as exc:
            return Ended(error=exc.message)

    def submitted_later(self, occ: OccurrenceId, at: datetime | None) -> Later:
        """Stamp when lanes acknowledged the turn's durable submit (the first stamp stays)."""
        return self.writer.submit(lambda txn: self._submitted(txn, occ, at))

    def _submitted(self, txn: Txn, occ: OccurrenceId, at: datetime | None) -> OccurrenceRow:
        row = self._row(txn, occ)
        if row is None or row.kind is None:
            raise OutcomeConflict(f"{occ.text} is not due: nothing was submitted")
        if row.submitted_at is not None:
            return row
        return self._put_row(txn, row.model_copy(update={"submitted_at": at or self.now()}))

    # outcomes ---------------------------------------------------------------------------------------
    def outcome_later(
        self, occ: OccurrenceId, outcome: Outcome, *, by: str = "", disable_after: int | None = None
    ) -> Later:
        """Write one outcome step: an :class:`OutcomeResult` after the commit, or the named refusal."""
        return self.writer.submit(lambda txn: self._outcome(txn, occ, outcome, by, disable_after))

    def _outcome(
        self, txn: Txn, occ: OccurrenceId, outcome: Outcome, by: str, disable_after: int | None
    ) -> OutcomeResult:
        if isinstance(outcome, Due | Missed):
            raise OutcomeConflict(f"{outcome.kind} is recorded by its own request (due / missed), not here")
        outcome = _redacted(outcome)
        row = self._row(txn, occ)
        if row is None:
            row = self._new_row(txn, occ, by)
        elif row.kind is None and row.holder != by:
            raise ClaimLost(f"{occ.text} is claimed by {row.holder}, not {by or 'nobody'}")
        if row.outcome == outcome:
            return OutcomeResult(row=row, changed=False)
        history = self._follow(row, outcome, by, self.now())
        row = self._put_row(txn, row.model_copy(update={"history": history}))
        cursor, disabled_now = None, False
        if isinstance(outcome, Skipped) and occ.instant is not None:
            cursor = self._advance(txn, occ.job, occ.instant)
        # a reconciled receipt settles an uncertain occurrence: it was never counted, nor is it now
        failed = None if getattr(outcome, "reconciled", None) else counts_as_failure(outcome)
        if failed is not None:
            cursor = self._cursor(txn, occ.job)
            count = cursor.consecutive_failures + 1 if failed else 0
            update: dict[str, Any] = {"consecutive_failures": count}
            if failed and disable_after is not None and count >= disable_after and not cursor.disabled:
                update |= {"disabled": True, "disabled_reason": f"{count} consecutive failures"}
                disabled_now = True
            cursor = self._put_cursor(txn, cursor.model_copy(update=update))
        return OutcomeResult(row=row, cursor=cursor, disabled_now=disabled_now)

    @staticmethod
    def _follow(row: OccurrenceRow, outcome: Outcome, by: str, now: datetime) -> list[Step]:
        try:
            changed = check_transition(row.outcome, outcome)
        except IllegalTransition as exc:
            what = row.occurrence_id
            if row.terminal:
                what += f" already ended {_said(row)}; refusing {outcome.kind}"
            raise OutcomeConflict(f"{what}: {exc.message}") from None
        return [*row.history, Step(outcome=outcome, at=now, by=by)] if changed else row.history

    def missed_later(self, job_id: str, missed: Missed, *, by: str = "") -> Later:
        """Record one missed range and move the cursor to its last instant, in one transaction."""
        return self.writer.submit(lambda txn: self._missed(txn, job_id, missed, by))

    def _missed(self, txn: Txn, job_id: str, missed: Missed, by: str) -> MissedRange:
        for at in (missed.first, missed.last):
            occurrence(job_id, at)  # a job name and whole-second instants, or BadRequest
        missed = _redacted(missed)
        first, last = utc_text(missed.first), utc_text(missed.last)
        db = self._db(MISSED)
        for _k, v in scan_prefix(txn, db, prefix(job_id)):
            old = MissedRange.model_validate(unpack(v))
            if old.missed == missed:
                return old  # a retried request
            if old.missed.first <= missed.last and missed.first <= old.missed.last:
                raise MissedOverlap(f"{job_id}: {_range(missed)} overlaps the missed range {_range(old)}")
        now = self.now()
        bare: list[bytes] = []  # every refusal comes before the first write (a batch keeps the others)
        for k, v in scan_prefix(txn, self._db(OCCURRENCES), prefix(job_id)):
            if not first <= k.split(b"\x00", 1)[1].decode() <= last:
                continue  # outside the range (a run-now's ``now:`` sorts after every instant)
            row = OccurrenceRow.model_validate(unpack(v))
            if row.kind is not None or (row.holder != by and row.lease_until and row.lease_until > now):
                raise MissedOverlap(f"{row.occurrence_id} has its own row: it cannot be missed")
            bare.append(k)
        for k in bare:
            txn.delete(k, db=self._db(OCCURRENCES))  # a bare claim: the range decides it
            txn.delete(k, db=self._db(OPEN))
        rng = MissedRange(job_id=job_id, missed=missed, recorded_at=now, by=by)
        txn.put(key(job_id, first), pack(rng.model_dump(mode="json")), db=db)
        self._advance(txn, job_id, missed.last)
        return rng


def _redacted(outcome: M) -> M:
    """The outcome with its reason masked and on one line (a refusal's text may quote what it refused)."""
    reason = getattr(outcome, "reason", None)
    if not reason:
        return outcome
    clean = redact_text(reason, REASON_MAX).replace("\r", " ").replace("\n", " ") or "-"
    return outcome if clean == reason else outcome.model_copy(update={"reason": clean})


def _text(instant: datetime) -> str:
    return utc_text(instant) if not instant.microsecond else instant.isoformat()


def _range(rng: MissedRange | Missed) -> str:
    m = rng.missed if isinstance(rng, MissedRange) else rng
    return f"{m.count} from {_text(m.first)} to {_text(m.last)}"


def _said(row: OccurrenceRow) -> str:
    out = row.outcome
    if out is None:
        return "nothing"
    result = getattr(out, "result", None)
    return f"{out.kind} ({result})" if result else str(out.kind)
