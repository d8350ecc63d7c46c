"""Instants as cron computes them, across DST in Europe/Berlin (2027: spring forward on 28 March 02:00 →
03:00, fall back on 31 October 03:00 → 02:00), with a scheduler ticking every 30 s on a fake clock."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta

from geode.schedule.instants import fire_at, iter_instants, jitter, next_instant
from tests.schedule.driver import FakeClock, Loop, job, local

BERLIN = "Europe/Berlin"
TICK = timedelta(seconds=30)


def _run_days(spec_created: datetime, end: datetime, **spec: object) -> list[datetime]:
    loop = Loop(job(spec_created, tz=BERLIN, **spec), FakeClock(spec_created))
    loop.run_until(end, TICK)
    assert loop.missed == []  # the scheduler was up: nothing is a catch-up
    return [t.astimezone(local(BERLIN, 2027, 1, 1).tzinfo) for t in loop.runs]


def test_daily_0230_fires_once_at_0300_on_the_spring_forward_day() -> None:
    runs = _run_days(local(BERLIN, 2027, 3, 27, 12), local(BERLIN, 2027, 3, 29, 12), cron="30 2 * * *")
    assert runs == [local(BERLIN, 2027, 3, 28, 3, 0), local(BERLIN, 2027, 3, 29, 2, 30)]
    assert runs[0].astimezone(UTC) == datetime(2027, 3, 28, 1, 0, tzinfo=UTC)


def test_daily_0230_fires_once_on_the_fall_back_day() -> None:
    runs = _run_days(local(BERLIN, 2027, 10, 30, 12), local(BERLIN, 2027, 11, 1, 12), cron="30 2 * * *")
    assert [t.astimezone(UTC) for t in runs] == [
        datetime(2027, 10, 31, 0, 30, tzinfo=UTC),  # 02:30 CEST, the first (fold=0)
        datetime(2027, 11, 1, 1, 30, tzinfo=UTC),  # 02:30 CET the next day
    ]


def test_hourly_fires_every_real_hour_both_0230s_on_the_fall_back_night() -> None:
    runs = _run_days(local(BERLIN, 2027, 10, 31, 0), local(BERLIN, 2027, 10, 31, 5), cron="30 * * * *")
    utc = [t.astimezone(UTC) for t in runs]
    assert all(b - a == timedelta(hours=1) for a, b in itertools.pairwise(utc))
    at_0230 = [t for t in runs if (t.hour, t.minute) == (2, 30)]
    assert [t.astimezone(UTC).hour for t in at_0230] == [0, 1]  # 02:30 CEST and 02:30 CET
    assert len(runs) == 6  # 00:30, 01:30, 02:30, 02:30, 03:30, 04:30: six real hours


def test_a_bound_inside_the_repeated_hour_never_gives_back_the_earlier_fold() -> None:
    # created at 02:10 CET (the second 02:10): the fixed-hour 02:45 already happened at fold=0 (00:45 UTC)
    created = local(BERLIN, 2027, 10, 31, 2, 10, fold=1)
    j = job(created, tz=BERLIN, cron="45 2 * * *")
    assert next_instant(j, created) == local(BERLIN, 2027, 11, 1, 2, 45).astimezone(UTC)
    hourly = job(created, tz=BERLIN, cron="45 * * * *")
    assert next_instant(hourly, created) == datetime(2027, 10, 31, 1, 45, tzinfo=UTC)  # 02:45 CET, real


def test_every_is_anchored_at_creation_not_at_the_scheduler_start() -> None:
    created = datetime(2027, 1, 1, 10, 0, 7, tzinfo=UTC)
    j = job(created, every="1m")
    for start in (created, created + timedelta(minutes=13, seconds=59.5), created - timedelta(days=1)):
        first = next_instant(j, start)
        assert first is not None and first > start
        assert (first - created).total_seconds() % 60 == 0
    assert next_instant(j, created) == created + timedelta(minutes=1)


def test_at_is_one_instant_read_in_its_zone() -> None:
    created = datetime(2027, 1, 1, tzinfo=UTC)
    j = job(created, at="2027-07-01T09:00:00", tz=BERLIN)
    assert list(iter_instants(j, created)) == [datetime(2027, 7, 1, 7, 0, tzinfo=UTC)]  # 09:00 CEST
    assert next_instant(j, datetime(2027, 7, 1, 7, 0, tzinfo=UTC)) is None


def test_jitter_is_deterministic_bounded_and_spread() -> None:
    created = datetime(2027, 1, 1, tzinfo=UTC)
    a, b = job(created, cron="0 * * * *", jitter_s=600), job(created, cron="0 * * * *", jitter_s=600)
    it = iter_instants(a, created)
    instants = [next(it) for _ in range(200)]
    delays = [jitter(a, t) for t in instants]
    assert delays == [jitter(b, t) for t in instants]  # another incarnation computes the same
    assert all(timedelta(0) <= d < timedelta(seconds=600) for d in delays)
    assert len(set(delays)) > 150  # spread, not one constant
    other = job(created, name="k", cron="0 * * * *", jitter_s=600)
    assert [jitter(other, t) for t in instants] != delays  # per job
    assert fire_at(a, instants[0]) == instants[0] + delays[0]
    assert jitter(job(created, cron="0 * * * *"), instants[0]) == timedelta(0)
