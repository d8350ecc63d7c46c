"""A job's scheduled instants (UTC, whole seconds), as cron computes them, and their deterministic jitter.

``cron`` runs in the job's zone with Debian cron's DST rules (cronsim): a local time that does not exist
(spring forward) fires once at the next valid instant; a job with a fixed minute and hour whose local time
occurs twice (fall back) fires once, at the first (fold=0); a job with a wildcard hour (``30 * * * *``) fires
every real hour, both 02:30s included. ``every`` is ``created_at + k * every`` (k >= 1) in real time; ``at``
is its one instant. Every function takes the lower bound explicitly: the scheduler passes the last instant it
decided, never "now", so a wall clock that jumps backwards never yields an instant twice.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

from cronsim import CronSim

from geode.schedule.jobs import Job
from geode.schedule.occurrences import utc_text


def _aware(t: datetime) -> datetime:
    if t.tzinfo is None or t.utcoffset() is None:
        raise ValueError(f"an instant needs a time zone, not {t!r}")
    return t.astimezone(UTC)


def _cron(job: Job, after: datetime) -> Iterator[datetime]:
    """Cron instants strictly after ``after``, increasing. cronsim walks a fixed-hour job in naive local time,
    so a bound inside the repeated hour of a fall-back (fold=1) can give back the fold=0 instant before it:
    those and the duplicates of a spring-forward shift are dropped here."""
    last = after
    for local in CronSim(job.cron or "", after.astimezone(job.zone)):
        instant = local.astimezone(UTC)
        if instant > last:
            last = instant
            yield instant


def _every_index(job: Job, after: datetime) -> int:
    """The k of the first ``every`` instant strictly after ``after`` (k >= 1)."""
    step = job.every or 1
    elapsed = int((after - job.created_at).total_seconds() // 1)
    return max(1, elapsed // step + 1)


def iter_instants(job: Job, after: datetime) -> Iterator[datetime]:
    """The job's instants strictly after ``after``, in order (finite for ``at``; a cron job that can never
    fire again ends after cronsim's 50-year search)."""
    after = _aware(after)
    if job.kind == "at":
        if job.at is not None and job.at > after:
            yield job.at
        return
    if job.kind == "every":
        step = timedelta(seconds=job.every or 1)
        k = _every_index(job, after)
        while True:
            instant = job.created_at + k * step
            if instant > after:  # after's fraction of a second can leave the first one behind
                yield instant
            k += 1
    else:
        yield from _cron(job, after)


def next_instant(job: Job, after: datetime) -> datetime | None:
    """The job's first instant strictly after ``after``; ``None`` when there is none (a past ``at``)."""
    return next(iter_instants(job, after), None)


def every_instant(job: Job, k: int) -> datetime:
    """The k-th instant of an ``every`` job (k >= 1)."""
    return job.created_at + k * timedelta(seconds=job.every or 1)


def every_count(job: Job, after: datetime, until: datetime) -> tuple[int, int]:
    """The k range ``(first, last)`` of the ``every`` instants in ``(after, until]`` (none: last < first)."""
    step = job.every or 1
    first = _every_index(job, _aware(after))
    last = int((_aware(until) - job.created_at).total_seconds() // step)
    return first, last


def jitter(job: Job, instant: datetime) -> timedelta:
    """The job's delay for ``instant``: in ``[0, jitter_s)`` whole milliseconds, a hash of (job, instant), so
    every scheduler incarnation computes the same one and spreading jobs costs no state."""
    if job.jitter_s <= 0:
        return timedelta(0)
    digest = hashlib.sha256(f"jitter\x00{job.name}\x00{utc_text(instant)}".encode()).digest()
    span_ms = job.jitter_s * 1000
    return timedelta(milliseconds=int.from_bytes(digest[:8], "big") % span_ms)


def fire_at(job: Job, instant: datetime) -> datetime:
    """When the occurrence of ``instant`` is due: the instant plus its jitter. Its id keeps the instant."""
    return instant + jitter(job, instant)
