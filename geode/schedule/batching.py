"""The scheduler driver's batched ledger writes (mixed into :class:`geode.schedule.driver.Driver`): a tick
decides every planned job in one request per ``BATCH_JOBS`` jobs (missed ranges, claims and dues in one store
transaction), stamps every submit it made in one, and records the outcomes it reached in one; a refusal is
that occurrence's alone. A tick's ledger requests are bounded by its jobs / ``BATCH_JOBS``, not ~7 per job."""

from __future__ import annotations

import logging
from datetime import datetime

from geode.protocol.errors import Conflict, GeodeError
from geode.records.schedule_models import ClaimResult, OccurrenceRow, OutcomeResult
from geode.schedule.definitions import JobState
from geode.schedule.following import Following
from geode.schedule.jobs import Job
from geode.schedule.occurrences import OccurrenceId
from geode.schedule.outcomes import DeliveryFailed, Done, Skipped, Uncertain
from geode.schedule.planner import Admission, Plan
from geode.schedule.ports import Ledger

log = logging.getLogger(__name__)
Ending = Done | DeliveryFailed | Uncertain | Skipped


class Batching:
    """What the driver batches; the rest of the driver it calls is declared here."""

    ledger: Ledger
    holder: str
    lease_s: float
    following: dict[str, Following]
    ending: list[tuple[Following, Ending]] | None
    queued: list[OccurrenceId] | None

    def now(self) -> datetime:
        raise NotImplementedError

    def _lower(self, state: JobState) -> datetime:
        raise NotImplementedError

    def _skip(self, job: Job, instant: datetime) -> None:
        raise NotImplementedError

    def _take(self, occ: OccurrenceId, claim: ClaimResult) -> tuple[OccurrenceRow | None, bool]:
        raise NotImplementedError

    def _submit(self, f: Following) -> bool:
        raise NotImplementedError

    def _finished(self, key: str) -> None:
        raise NotImplementedError

    def _limit(self, job: str) -> int | None:
        raise NotImplementedError

    def _recorded(self, f: Following, res: OutcomeResult) -> None:
        raise NotImplementedError

    def fire(self, occ: OccurrenceId) -> tuple[OccurrenceRow | None, bool]:
        raise NotImplementedError

    def _decide(self, planned: list[tuple[JobState, Plan, Admission]]) -> None:
        """Every planned job's missed range, claims and dues in one ledger request (per ``BATCH_JOBS``): each
        job's refusals are its own; then the skipped instants, and the claimed ones are followed."""
        runs = [
            [i for i in adm.run if OccurrenceId(job=s.job.name, instant=i).text not in self.following]
            for s, _p, adm in planned
        ]
        asks = [
            (s.job.name, p.missed, r) for (s, p, _a), r in zip(planned, runs, strict=True) if p.missed or r
        ]
        decided = iter(self.ledger.decide(asks, holder=self.holder, lease_s=self.lease_s) if asks else [])
        for (state, p, adm), run in zip(planned, runs, strict=True):
            job = state.job
            d = next(decided) if p.missed or run else None
            if p.missed is not None:
                if d is not None and d.missed_error:  # already recorded (a lost reply's retry): it stands
                    log.info("scheduler: missed range of %s already recorded: %s", job.name, d.missed_error)
                state.bound = max(self._lower(state), p.missed.last)
            for instant in adm.skip:
                self._skip(job, instant)
            for instant, fired in zip(run, d.fired if d is not None else [], strict=True):
                occ = OccurrenceId(job=job.name, instant=instant)
                if fired.claim is None:
                    log.info("scheduler: %s not fired: %s", occ.text, fired.error)
                else:
                    self._take(occ, fired.claim)
            if p.run:
                state.bound = max(self._lower(state), p.run[-1])

    def _submit_all(self) -> None:
        """Submit every freshly leased occurrence not submitted yet, then stamp them all in one request (a
        stamp refused or lost: :meth:`_progress` submits again under the same turn id and stamps it alone)."""
        now, sent = self.now(), []
        for key, f in list(self.following.items()):
            fresh = f.renewed_at is not None and (now - f.renewed_at).total_seconds() <= self.lease_s / 3
            if key not in self.following or f.submitted or f.end is not None or not fresh:
                continue
            try:
                if self._submit(f):
                    sent.append(f)
            except Conflict as exc:
                log.info("scheduler: %s no longer followed: %s", key, exc)
                self._finished(key)
            except GeodeError as exc:
                log.info("scheduler: %s waits: %s", key, exc)
        try:
            stamped = self.ledger.submitted_many([f.occ for f in sent]) if sent else []
        except GeodeError as exc:
            log.info("scheduler: %d submits not stamped yet: %s", len(sent), exc)
            return
        for f, s in zip(sent, stamped, strict=True):
            if s.row is not None:
                f.row, f.submitted = s.row, True

    def _end_all(self) -> None:
        """Record the tick's outcomes in one request per ``BATCH_JOBS`` (the store unreachable: each is
        followed again next tick); then fire, in one batch, the queued instants they let run."""
        items, self.ending = self.ending or [], None
        if not items:
            return
        self.queued = []
        try:
            asks = [(f.occ, o, self.holder, self._limit(f.occ.job)) for f, o in items]
            try:
                ended = self.ledger.outcome_many(asks)
            except GeodeError as exc:
                log.info("scheduler: %d outcomes wait: %s", len(items), exc)
                for f, _o in items:
                    f.ending = False
                return
            for (f, _o), e in zip(items, ended, strict=True):
                if e.result is None:  # decided elsewhere (another scheduler, an operator): not ours now
                    log.info("scheduler: %s no longer followed: %s", f.occ.text, e.error)
                    self._finished(f.occ.text)
                else:
                    self._recorded(f, e.result)
            queued = self.queued
        finally:
            self.queued = None
        self._fire_queued(queued)

    def _fire_queued(self, queued: list[OccurrenceId]) -> None:
        by_job: dict[str, list[datetime]] = {}
        for occ in queued:
            if occ.instant is None or occ.text in self.following:
                continue
            by_job.setdefault(occ.job, []).append(occ.instant)
        try:
            decided = (
                self.ledger.decide(
                    [(j, None, ins) for j, ins in by_job.items()], holder=self.holder, lease_s=self.lease_s
                )
                if by_job
                else []
            )
        except GeodeError as exc:  # fired one by one next tick (the queue keeps them)
            log.info("scheduler: %d queued instants wait: %s", len(by_job), exc)
            for occ in queued:
                self.fire(occ)
            return
        for (job, instants), d in zip(by_job.items(), decided, strict=True):
            for instant, fired in zip(instants, d.fired, strict=True):
                occ = OccurrenceId(job=job, instant=instant)
                if fired.claim is None:
                    log.info("scheduler: %s not fired: %s", occ.text, fired.error)
                else:
                    self._take(occ, fired.claim)
        self._submit_all()
