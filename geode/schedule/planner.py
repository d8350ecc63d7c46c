"""What the scheduler does with a job now: which instants to run, which missed ones become one range row, when
to look again; then overlap admission and failure backoff. Pure: the caller passes the job's last decided
instant (its bound, never "now", so a wall clock jumping backwards decides nothing twice) and the clock's now.

An instant is due when its fire time (instant + jitter) has passed. A due instant whose fire time is more than
``grace_s`` ago was missed (the scheduler was down or asleep); the job's catch-up policy decides those:
``skip`` runs none and records one ``missed`` range row (count, first, last); ``once`` runs the latest and
records the rest as one range row; ``all`` runs up to ``catch_up_max`` (the latest ones) and records the rest
as one range row. Instants within the grace run as scheduled.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field

from geode.schedule.instants import every_count, every_instant, fire_at, iter_instants
from geode.schedule.jobs import Job, JobSpec
from geode.schedule.occurrences import turn_id_for
from geode.schedule.outcomes import Missed, Outcome, counts_as_failure
from geode.schedule.settings import DEFAULT_GRACE_S


class Plan(BaseModel):
    """One planning decision for one job: ``run`` (oldest first) and at most one ``missed`` range row;
    ``decided_through`` is the job's new bound (store it with the decision), ``wake_at`` the next fire time
    (``None``: the job has no instant left, e.g. a decided ``at``, or it is paused)."""

    model_config = ConfigDict(frozen=True)
    run: tuple[AwareDatetime, ...] = ()
    missed: Missed | None = None
    decided_through: AwareDatetime | None = None
    wake_at: AwareDatetime | None = None


class _Late:
    """The missed instants of a window without holding them all: count, first, and the latest ``keep``."""

    def __init__(self, keep: int) -> None:
        self.keep = keep
        self.count = 0
        self.first: datetime | None = None
        self.recent: deque[datetime] = deque(maxlen=keep)

    def bulk(self, first: datetime, count: int) -> None:
        self.count += count
        self.first = self.first or first

    def add(self, instant: datetime) -> None:
        self.bulk(instant, 1)
        self.recent.append(instant)

    def range_row(self, ran: int) -> Missed | None:
        """The row for all but the latest ``ran`` (which run); ``None`` when nothing is left over."""
        left = self.count - ran
        if left <= 0 or self.first is None:
            return None
        return Missed(count=left, first=self.first, last=self.recent[-1 - ran])


def _keep(job: Job) -> int:
    return {"skip": 1, "once": 2, "all": job.catch_up_max + 1}[job.catch_up]


def plan(
    job: Job,
    bound: datetime | None,
    now: datetime,
    *,
    grace_s: float = DEFAULT_GRACE_S,
    disabled: bool = False,
) -> Plan:
    """Decide the job's instants in ``(bound, now]`` (``bound`` ``None``: since its creation)."""
    now = now.astimezone(UTC)
    if job.paused or disabled:
        return Plan(decided_through=bound)
    lower = bound if bound is not None else job.created_at
    late_before = now - timedelta(seconds=grace_s)
    late, on_time = _Late(_keep(job)), list[datetime]()
    after = lower
    if job.kind == "every" and job.every:  # skip the middle of a long window arithmetically
        k_first, k_last = every_count(job, lower, now)
        margin = late.keep + math.ceil((grace_s + job.jitter_s) / job.every) + 2
        if k_last - margin >= k_first:
            late.bulk(every_instant(job, k_first), k_last - margin - k_first + 1)
            after = every_instant(job, k_last - margin)
    upcoming: datetime | None = None
    for instant in iter_instants(job, after):
        due = fire_at(job, instant)
        if due > now:
            upcoming = due
            break
        if due < late_before and not on_time:  # missed ones are a prefix of the window
            late.add(instant)
        else:
            on_time.append(instant)
    ran = {"skip": 0, "once": 1, "all": job.catch_up_max}[job.catch_up] if late.count else 0
    ran = min(ran, late.count)
    run = (*list(late.recent)[len(late.recent) - ran :], *on_time) if ran else tuple(on_time)
    missed = late.range_row(ran)
    decided = max(
        [t for t in (bound, missed.last if missed else None, *run[-1:]) if t is not None], default=None
    )
    return Plan(run=run, missed=missed, decided_through=decided, wake_at=upcoming)


def resume_bound(bound: datetime | None, now: datetime) -> datetime:
    """The bound of a job resumed (or re-enabled) at ``now``: instants while it was paused are not its
    occurrences, and a bound never moves back."""
    now = now.astimezone(UTC).replace(microsecond=0)
    return max(bound, now) if bound is not None else now


_TIMING = ("cron", "every", "at", "tz")


def redefine(
    stored: Job | None, spec: JobSpec, bound: datetime | None, now: datetime
) -> tuple[Job, datetime | None]:
    """The stored job and bound after (re)defining it as ``spec`` at ``now`` (add, or a reload of config):
    a new job, or one whose timing (cron, every, at, tz) changed, is anchored at ``now`` and its new instants
    start there (occurrences already decided keep their course, none is decided again; plan the old definition
    up to ``now`` first); any other change keeps the anchor and the bound. Check a new or re-timed job with
    :func:`geode.schedule.jobs.check_new` first."""
    now = now.astimezone(UTC).replace(microsecond=0)
    if stored is None:
        return spec.stored(now), bound
    if any(getattr(stored, f) != getattr(spec, f) for f in _TIMING):
        return spec.stored(now), max(bound, now) if bound is not None else now
    return spec.stored(stored.created_at), bound


OverlapVerdict = Literal["run", "queue", "skip"]


class Admission(BaseModel):
    """Overlap admission of a plan's runs: start now, queue behind the running one, or record ``skipped``."""

    model_config = ConfigDict(frozen=True)
    run: tuple[AwareDatetime, ...] = ()
    queue: tuple[AwareDatetime, ...] = ()
    skip: tuple[AwareDatetime, ...] = ()


def admit(job: Job, instants: Sequence[datetime], running: int, queued: int) -> Admission:
    """Overlap policy for a plan's ``instants``, given the job's occurrences ``running`` and ``queued``.

    ``allow`` runs every one at once (new session per run only). Otherwise one runs at a time: with nothing
    running, the first starts and the rest of the batch (a catch-up) queue behind it in order; while an
    earlier occurrence runs, ``skip`` skips them all and ``queue_one`` queues the latest (if none is queued
    yet) and skips the rest."""
    batch = tuple(instants)
    if not batch:
        return Admission()
    if job.overlap == "allow":
        return Admission(run=batch)
    if running == 0 and queued == 0:
        return Admission(run=batch[:1], queue=batch[1:])
    if job.overlap == "queue_one" and queued == 0:
        return Admission(queue=batch[-1:], skip=batch[:-1])
    return Admission(skip=batch)


class Health(BaseModel):
    """A job's failure backoff state: consecutive failures, and whether that disabled it."""

    model_config = ConfigDict(frozen=True)
    failures: int = Field(default=0, ge=0)
    disabled: bool = False
    last_error: str = ""


def after_outcome(job: Job, health: Health, outcome: Outcome) -> tuple[Health, bool]:
    """The health after an occurrence's terminal ``outcome`` and whether this outcome disabled the job
    (then post :func:`disabled_notice` to its delivery chat, as a receipted post)."""
    failed = counts_as_failure(outcome)
    if failed is None or health.disabled:
        return health, False
    if not failed:
        return Health(), False
    failures = health.failures + 1
    disable = 0 < job.disable_after_failures <= failures
    reason = getattr(outcome, "reason", "")
    return Health(failures=failures, disabled=disable, last_error=reason), disable


def disabled_notice(job: Job, health: Health) -> str:
    return (
        f"Scheduled job {job.name!r} is disabled after {health.failures} consecutive failures "
        f"(last: {health.last_error or 'unknown'}). Resume it with: geode schedule resume {job.name}"
    )


def notice_operation_id(occurrence: str) -> str:
    """The receipt operation id of the disabled notice the failing ``occurrence`` caused: posted once."""
    return f"disabled-{turn_id_for(occurrence)}"
