"""The scheduler's loop, pure: what the ``scheduler`` child does at its start and at every tick, over the
ledger, lanes and a chat given as ports (:mod:`geode.schedule.ports`) and a clock it is handed.

At start it loads the stored jobs and follows every open occurrence of the ledger (claimed, due or
delivering): a claimed one not yet due is claimed again and fired; a due one is followed, never fired a
second time (its turn is submitted again under the same turn id, which lanes admits once). At each tick it
plans every job from its cursor (:func:`geode.schedule.planner.plan`), records a missed range as one row,
admits the runs by the overlap policy (a skipped instant is recorded ``skipped``), and for each run: claim
→ ``due`` (the cursor moves with it) → submit the occurrence's turn. It follows each turn to its end and
records exactly one terminal outcome: ``done``, or, for a job that delivers, what the reply's receipt says
(posted → done, refused → delivery_failed, uncertain → uncertain, deferred → delivering until it settles).
It never runs a turn itself.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from geode import faults
from geode.metrics import record as metrics
from geode.protocol.errors import Conflict, ErrorCode, GeodeError
from geode.records.schedule_models import ClaimKind, ClaimResult, JobCursor, OccurrenceRow, OutcomeResult
from geode.schedule.batching import Batching, Ending
from geode.schedule.definitions import Definitions, JobState
from geode.schedule.following import Following, one_line
from geode.schedule.following import reply_operation_id as reply_operation_id
from geode.schedule.heartbeat import EMPTY_FILE, NO_FILE, is_quiet, quiet
from geode.schedule.jobs import Job
from geode.schedule.occurrences import OccurrenceId
from geode.schedule.outcomes import (
    Delivering,
    DeliveryFailed,
    Done,
    Skipped,
    Uncertain,
    done_for,
)
from geode.schedule.planner import (
    Admission,
    Health,
    Plan,
    admit,
    disabled_notice,
    notice_operation_id,
    plan,
)
from geode.schedule.ports import Chat, Ledger, Turns
from geode.schedule.settings import DEFAULT_GRACE_S, HEARTBEAT_JOB

log = logging.getLogger(__name__)
Clock = Callable[[], datetime]
LEASE_S = 30.0
RECONCILE_S = 30.0  # how often uncertain occurrences' receipts are looked at
DELIVER_ATTEMPTS = 8  # a reply deferred this many times (with backoff) is given up: delivery_failed
NO_ANSWER = "The scheduled run ended without an answer ({reason})."


class Driver(Definitions, Batching):
    """The scheduler loop over ``ledger``, ``turns`` and ``chat`` (None: no delivery possible here)."""

    def __init__(
        self,
        ledger: Ledger,
        turns: Turns,
        chat: Chat | None,
        clock: Clock,
        holder: str,
        *,
        grace_s: float = DEFAULT_GRACE_S,
        lease_s: float = LEASE_S,
        heartbeat: Callable[[Job], str | None] | None = None,
    ) -> None:
        self.ledger, self.turns, self.chat, self.clock, self.holder = ledger, turns, chat, clock, holder
        self.heartbeat = heartbeat  # reads the heartbeat job's HEARTBEAT.md (None: no heartbeat here)
        self.grace_s, self.lease_s = grace_s, lease_s
        self.jobs: dict[str, JobState] = {}
        self.following: dict[str, Following] = {}
        self.waiting: dict[str, OccurrenceId] = {}  # held by another live scheduler: asked again next tick
        self.reconcile_at: datetime | None = None  # next look at uncertain occurrences (None: next tick)
        self.ending: list[tuple[Following, Ending]] | None = None  # a tick's outcomes (None: right away)
        self.queued: list[OccurrenceId] | None = None

    def now(self) -> datetime:
        return self.clock().astimezone(UTC)

    # --- start ----------------------------------------------------------------------------------------
    def start(self) -> None:
        """Load the stored jobs, then follow every open occurrence (never firing a due one again)."""
        from geode.schedule.stored import job_of

        for entry in self.ledger.jobs():
            if entry.job is None:
                continue
            try:
                job, declarative = job_of(entry.job)
            except GeodeError as exc:
                log.warning("scheduler: stored job %s not loaded: %s", entry.cursor.job_id, exc)
                continue
            state = JobState(job, entry.cursor, declarative, record=entry.job)
            state.anchored = job.created_at != entry.job.created_at
            self.jobs[job.name] = state
        for row in self.ledger.open_occurrences():
            occ = OccurrenceId(job=row.job_id, instant=row.instant, request_id=row.request_id or None)
            self.fire(occ)

    # --- the tick -------------------------------------------------------------------------------------
    def tick(self) -> None:
        """Plan every job, then move every followed occurrence one step on."""
        for key, occ in list(self.waiting.items()):
            del self.waiting[key]
            self.fire(occ)
        planned = [x for state in list(self.jobs.values()) if (x := self._plan(state)) is not None]
        try:
            self._decide(planned)
        except GeodeError as exc:  # the store is restarting: the cursors are unchanged, plan again
            log.info("scheduler: planning %d jobs deferred: %s", len(planned), exc)
        now = self.now()
        if self.chat is not None and (self.reconcile_at is None or now >= self.reconcile_at):
            self.reconcile_at = now + timedelta(seconds=RECONCILE_S)
            try:
                self._reconcile()
            except GeodeError as exc:
                log.info("scheduler: uncertain occurrences not looked at: %s", exc)
        self.ending = []  # the outcomes of this tick: recorded together at its end
        try:
            self._submit_all()
            for key in list(self.following):
                try:
                    self._progress(self.following[key])
                except Conflict as exc:  # decided elsewhere (another scheduler, an operator): not ours now
                    log.info("scheduler: %s no longer followed: %s", key, exc)
                    self._finished(key)
                except GeodeError as exc:
                    log.info("scheduler: %s waits: %s", key, exc)
        finally:
            self._end_all()

    def _lower(self, state: JobState) -> datetime:
        from geode.schedule.stored import resumed_at

        marks = [state.job.created_at, state.cursor.last_instant, state.bound, resumed_at(state.record)]
        return max(t for t in marks if t is not None)

    def _plan(self, state: JobState) -> tuple[JobState, Plan, Admission] | None:
        """The job's plan and admission (its queue grows now); None: nothing to record for it."""
        job, cursor = state.job, state.cursor
        p = plan(
            job,
            self._lower(state),
            self.now(),
            grace_s=self.grace_s,
            disabled=cursor.disabled or cursor.paused,
        )
        if p.missed is None and not p.run:
            return None
        running = sum(1 for f in self.following.values() if f.occ.job == job.name and f.occ.instant)
        adm = admit(job, p.run, running, len(state.queue))
        state.queue.extend(adm.queue)
        return state, p, adm

    def _skip(self, job: Job, instant: datetime) -> None:
        occ = OccurrenceId(job=job.name, instant=instant)
        claim = self.ledger.claim(occ, holder=self.holder, lease_s=self.lease_s)
        if claim.kind == ClaimKind.CLAIMED:
            res = self.ledger.outcome(occ, Skipped(), by=self.holder)
            self._cursor(job.name, res.cursor)

    def fire(self, occ: OccurrenceId) -> tuple[OccurrenceRow | None, bool]:
        """Claim ``occ`` and, if nobody recorded it due yet, record it due and follow it; a due one is
        followed (never fired again). The row and whether it was new (False: a repeat or someone else's)."""
        key = occ.text
        if key in self.following:
            return self.following[key].row, False
        claim = self.ledger.claim(occ, holder=self.holder, lease_s=self.lease_s)
        if claim.kind == ClaimKind.CLAIMED:
            row = self.ledger.due(occ, holder=self.holder, lease_s=self.lease_s)
            claim = ClaimResult(kind=claim.kind, row=row)
        return self._take(occ, claim)

    def _take(self, occ: OccurrenceId, claim: ClaimResult) -> tuple[OccurrenceRow | None, bool]:
        """Follow ``occ`` after its claim (``claimed``: recorded due with it), or wait for another holder."""
        key = occ.text
        if claim.kind == ClaimKind.HELD:
            self.waiting[key] = occ
            return claim.row, False
        if claim.kind == ClaimKind.DECIDED:
            return claim.row, False
        new = claim.kind == ClaimKind.CLAIMED
        row = claim.row
        assert row is not None
        if new:
            faults.fault("scheduler.after_due")
            if occ.instant is not None:  # recorded due now: how late after its instant
                metrics.scheduler_lag((self.now() - occ.instant).total_seconds())
        self.following[key] = Following(
            occ, row, submitted=row.submitted_at is not None, renewed_at=self.now()
        )
        if occ.instant is not None and (state := self.jobs.get(occ.job)) is not None:
            state.cursor = state.cursor.model_copy(
                update={"last_instant": max(self._lower(state), occ.instant)}
            )
        return row, new

    # --- following ------------------------------------------------------------------------------------
    def _progress(self, f: Following) -> None:
        if f.ending:
            return  # its outcome is recorded at the end of this tick
        now = self.now()
        if f.renewed_at is None or (now - f.renewed_at).total_seconds() > self.lease_s / 3:
            self.ledger.claim(f.occ, holder=self.holder, lease_s=self.lease_s)  # keep the lease: it is ours
            f.renewed_at = now
        state = self.jobs.get(f.occ.job)
        if f.end is None:
            if not f.submitted:
                if not self._submit(f):
                    return
                f.row = self.ledger.submitted(f.occ)
                f.submitted = True
            f.end = self.turns.ended(f.row.turn_id)
            if f.end is None:
                return
        done = done_for(f.end.termination_reason)
        if state is not None and self._beats(state) and done.result == "ok" and is_quiet(f.end.text):
            self._record(f, quiet(done))  # HEARTBEAT_OK: nothing to say, nothing posted
            return
        target = state.job.deliver if state is not None else None
        if state is None or target is None or self.chat is None:
            self._record(f, done)
            return
        if f.retry_at is not None and now < f.retry_at:
            return
        text = f.end.text if f.end.text.strip() else NO_ANSWER.format(reason=f.end.termination_reason)
        op = reply_operation_id(f.row.turn_id)
        d = self.chat.post(state.job, f.row, text, operation_id=op)
        reason = one_line(d.reason or d.state)
        if d.state == "posted":
            self._record(f, done)
        elif d.state == "uncertain":
            self._record(f, Uncertain(reason=reason, operation_id=op))
        elif d.state == "refused":
            self._record(f, DeliveryFailed(reason=reason))
        elif f.attempts + 1 >= DELIVER_ATTEMPTS:
            self._record(
                f, DeliveryFailed(reason=f"not posted after {DELIVER_ATTEMPTS} tries: {reason}"[:500])
            )
        else:
            f.attempts += 1
            f.retry_at = now + timedelta(seconds=min(2.0**f.attempts, 300.0))
            self.ledger.outcome(f.occ, Delivering(reason=reason), by=self.holder)

    def _submit(self, f: Following) -> bool:
        """Submit ``f``'s turn to lanes (True), or record why it does not run (False)."""
        state = self.jobs.get(f.occ.job)
        if state is None:  # removed before its turn was submitted: it does not run
            self._record(f, Skipped(reason="job removed before it ran"))
            return False
        try:
            job, why = self._job_to_run(state)
            if job is None:  # the heartbeat without a HEARTBEAT.md: nobody is asked
                self._record(f, Done(result="ok", reason=why))
                return False
            self.turns.submit(job, f.row)
        except GeodeError as exc:  # refused for good (a bad setting, a workspace it cannot make)
            if exc.code != ErrorCode.BAD_REQUEST:
                raise  # lanes or the store restarting: submitted again next tick (the same turn id)
            self._record(f, Done(result="error", reason=one_line(f"not submitted: {exc.message}")))
            return False
        faults.fault("scheduler.after_submit")
        return True

    def _beats(self, state: JobState) -> bool:
        return self.heartbeat is not None and state.declarative and state.job.name == HEARTBEAT_JOB

    def _job_to_run(self, state: JobState) -> tuple[Job | None, str]:
        """The job as submitted: the heartbeat's prompt is its ``HEARTBEAT.md`` now (None and why: none)."""
        if not self._beats(state):
            return state.job, ""
        assert self.heartbeat is not None
        text = self.heartbeat(state.job)
        if text is None or not text.strip():
            return None, NO_FILE if text is None else EMPTY_FILE
        return state.job.model_copy(update={"prompt": text}), ""

    def _reconcile(self) -> None:
        """An ``uncertain`` occurrence follows its reply receipt once that is reconciled (its history keeps
        the ``uncertain``)."""
        assert self.chat is not None
        for row in self.ledger.runs(None, limit=500).occurrences:
            outcome = row.outcome
            if not isinstance(outcome, Uncertain):
                continue
            rec = self.chat.reconciled(outcome.operation_id)
            if rec is None:
                continue
            occ = OccurrenceId(job=row.job_id, instant=row.instant, request_id=row.request_id or None)
            if rec.posted:
                end = self.turns.ended(row.turn_id)
                done = done_for(end.termination_reason if end is not None else "natural")
                new: Done | DeliveryFailed = done.model_copy(update={"reconciled": rec.by})
            else:
                new = DeliveryFailed(reason=f"the reply was not posted ({rec.by})", reconciled=rec.by)
            res = self.ledger.outcome(occ, new, by=self.holder)
            self._cursor(row.job_id, res.cursor)

    def _record(self, f: Following, outcome: Done | DeliveryFailed | Uncertain | Skipped) -> None:
        if self.ending is not None:  # in a tick: with the others at its end (:meth:`_end_all`)
            f.ending = True
            self.ending.append((f, outcome))
            return
        res = self.ledger.outcome(f.occ, outcome, by=self.holder, disable_after=self._limit(f.occ.job))
        self._recorded(f, res)

    def _limit(self, job: str) -> int | None:
        state = self.jobs.get(job)
        return (state.job.disable_after_failures if state is not None else 0) or None

    def _recorded(self, f: Following, res: OutcomeResult) -> None:
        state = self.jobs.get(f.occ.job)
        self._cursor(f.occ.job, res.cursor)
        self._finished(f.occ.text)
        if res.disabled_now and state is not None and res.cursor is not None:
            self._notify_disabled(state, res.cursor, f)

    def _notify_disabled(self, state: JobState, cursor: JobCursor, f: Following) -> None:
        target = state.job.deliver
        log.warning(
            "scheduler: job %s disabled after %d failures", state.job.name, cursor.consecutive_failures
        )
        if target is None or self.chat is None:
            return
        health = Health(
            failures=cursor.consecutive_failures, disabled=True, last_error=cursor.disabled_reason
        )
        try:
            notice = disabled_notice(state.job, health)
            self.chat.post(state.job, f.row, notice, operation_id=notice_operation_id(f.occ.text))
        except GeodeError as exc:
            log.warning("scheduler: the disabled notice of %s was not posted: %s", state.job.name, exc)

    def _finished(self, key: str) -> None:
        f = self.following.pop(key, None)
        state = self.jobs.get(f.occ.job) if f is not None else None
        if (
            state is not None
            and state.queue
            and not any(x.occ.job == state.job.name for x in self.following.values())
        ):
            occ = OccurrenceId(job=state.job.name, instant=state.queue.pop(0))
            if self.queued is not None:  # recording a tick's outcomes: fired together after them
                self.queued.append(occ)
            else:
                self.fire(occ)

    def _cursor(self, job: str, cursor: JobCursor | None) -> None:
        state = self.jobs.get(job)
        if state is not None and cursor is not None:
            state.cursor = cursor
