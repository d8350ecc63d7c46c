"""The planner on a fake clock: a host down for two hours gets exactly what each catch-up policy names, an
``at`` inside the window runs once, a wall clock jumping backwards fires nothing twice, overlap admission,
failure backoff."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from geode.schedule.instants import fire_at, iter_instants
from geode.schedule.jobs import parse_job
from geode.schedule.outcomes import Delivering, DeliveryFailed, Done, Skipped, Uncertain
from geode.schedule.planner import (
    Health,
    admit,
    after_outcome,
    disabled_notice,
    plan,
    redefine,
    resume_bound,
)
from tests.schedule.driver import FakeClock, Loop, job

T0 = datetime(2027, 1, 1, 0, 0, 30, tzinfo=UTC)
TICK = timedelta(seconds=20)


def _hour(h: int) -> datetime:
    return datetime(2027, 1, 1, h, tzinfo=UTC)


def _down_two_hours(**spec: object) -> Loop:
    """Up until 09:30, down until 11:30 (the 10:00 and 11:00 instants pass unseen), up until 13:30."""
    loop = Loop(job(T0, **spec), FakeClock(T0))
    loop.run_until(_hour(9) + timedelta(minutes=30), TICK)
    up = [_hour(h) for h in range(1, 10)] if loop.job.kind == "cron" else []
    assert loop.runs == up and loop.missed == []
    loop.clock.set(_hour(11) + timedelta(minutes=30))  # restart
    loop.tick()
    loop.run_until(_hour(13) + timedelta(minutes=30), TICK)
    return loop


def test_down_two_hours_catch_up_skip_records_one_range_row_and_runs_none() -> None:
    loop = _down_two_hours(cron="0 * * * *", catch_up="skip")
    assert loop.runs[9:] == [_hour(12), _hour(13)]
    assert [(m.count, m.first, m.last) for m in loop.missed] == [(2, _hour(10), _hour(11))]


def test_down_two_hours_catch_up_once_runs_the_latest_and_records_the_rest() -> None:
    loop = _down_two_hours(cron="0 * * * *", catch_up="once")
    assert loop.runs[9:] == [_hour(11), _hour(12), _hour(13)]
    assert [(m.count, m.first, m.last) for m in loop.missed] == [(1, _hour(10), _hour(10))]


def test_down_two_hours_catch_up_all_runs_every_missed_instant() -> None:
    loop = _down_two_hours(cron="0 * * * *", catch_up="all")
    assert loop.runs[9:] == [_hour(10), _hour(11), _hour(12), _hour(13)]
    assert loop.missed == []


def test_catch_up_all_stops_at_its_max_and_the_rest_is_one_range_row() -> None:
    j = job(T0, cron="0 * * * *", catch_up="all", catch_up_max=3)
    p = plan(j, _hour(1), _hour(9) + timedelta(minutes=30))
    assert p.run == (_hour(7), _hour(8), _hour(9))
    assert p.missed is not None and (p.missed.count, p.missed.first, p.missed.last) == (5, _hour(2), _hour(6))
    assert p.decided_through == _hour(9) and p.wake_at == _hour(10)


def test_an_at_inside_the_window_runs_exactly_once_after_the_restart() -> None:
    loop = _down_two_hours(at="2027-01-01T10:15:00Z")
    assert loop.runs == [datetime(2027, 1, 1, 10, 15, tzinfo=UTC)] and loop.missed == []
    skipped = _down_two_hours(at="2027-01-01T10:15:00Z", catch_up="skip")
    assert skipped.runs == [] and [m.count for m in skipped.missed] == [1]


def test_a_wall_clock_jumping_backwards_fires_nothing_twice() -> None:
    loop = Loop(job(T0, every="5m"), FakeClock(T0))
    loop.run_until(_hour(2), TICK)
    loop.clock.set(_hour(1))  # NTP steps the clock back an hour
    loop.run_until(_hour(3), TICK)
    assert len(loop.runs) == len(set(loop.runs))
    it = iter_instants(loop.job, T0)
    expected = [next(it) for _ in range(35)]  # every 5 minutes from 00:05:30 to 02:55:30
    assert loop.runs == expected and loop.missed == []
    again = plan(loop.job, loop.bound, _hour(1))  # a restart at the earlier time decides nothing
    assert again.run == () and again.missed is None and again.decided_through == loop.bound


def test_jitter_delays_the_run_but_the_occurrence_keeps_its_instant() -> None:
    j = job(T0, cron="0 * * * *", jitter_s=900)
    instant = _hour(5)
    due = fire_at(j, instant)
    assert instant < due < instant + timedelta(seconds=900)
    assert plan(j, _hour(4), due - timedelta(seconds=1)).run == ()
    assert plan(j, _hour(4), due).run == (instant,)


def test_a_long_every_window_counts_its_missed_instants_exactly() -> None:
    j = job(T0, every=10, jitter_s=7, catch_up="skip")
    now = T0 + timedelta(days=1, seconds=3)
    p = plan(j, None, now, grace_s=60)
    it, late, on_time = iter_instants(j, T0), 0, []
    for t in it:
        if fire_at(j, t) > now:
            break
        if fire_at(j, t) < now - timedelta(seconds=60) and not on_time:
            late += 1
        else:
            on_time.append(t)
    assert p.missed is not None and p.missed.count == late > 8000
    assert p.missed.first == T0 + timedelta(seconds=10)
    assert p.run == tuple(on_time) and p.decided_through == on_time[-1]


def test_paused_jobs_decide_nothing_and_resume_from_the_resume_instant() -> None:
    j = job(T0, cron="0 * * * *", paused=True)
    assert plan(j, _hour(1), _hour(5)).run == ()
    bound = resume_bound(_hour(1), _hour(5) + timedelta(minutes=3, microseconds=7))
    resumed = job(T0, cron="0 * * * *")
    p = plan(resumed, bound, _hour(6) + timedelta(seconds=5))
    assert p.run == (_hour(6),) and p.missed is None
    assert resume_bound(_hour(9), _hour(5)) == _hour(9)  # never back


def test_overlap_admission() -> None:
    one = [_hour(3)]
    assert admit(job(T0, every=60), one, running=1, queued=0).skip == tuple(one)
    queue_one = job(T0, every=60, overlap="queue_one")
    assert admit(queue_one, one, running=1, queued=0).queue == tuple(one)
    assert admit(queue_one, one, running=1, queued=1).skip == tuple(one)
    assert admit(job(T0, every=60, overlap="allow"), one, running=4, queued=0).run == tuple(one)
    batch = [_hour(1), _hour(2), _hour(3)]
    fresh = admit(job(T0, every=60), batch, running=0, queued=0)
    assert fresh.run == (_hour(1),) and fresh.queue == (_hour(2), _hour(3))
    busy = admit(queue_one, batch, running=1, queued=0)
    assert busy.queue == (_hour(3),) and busy.skip == (_hour(1), _hour(2))


def test_consecutive_failures_disable_the_job_once_and_say_so() -> None:
    j = job(T0, every=60, disable_after_failures=3)
    fail, ok = Done(result="error", reason="internal_error"), Done(result="ok", reason="natural")
    h = Health()
    for outcome in (fail, fail, ok, fail, Skipped(), Uncertain(reason="x", operation_id="op"), fail):
        h, disabled = after_outcome(j, h, outcome)
        assert not disabled
    assert h.failures == 2
    h, disabled = after_outcome(j, h, DeliveryFailed(reason="bot was blocked by the user"))
    assert disabled and h.disabled and h.failures == 3
    assert "disabled after 3 consecutive failures (last: bot was blocked" in disabled_notice(j, h)
    assert after_outcome(j, h, fail) == (h, False)  # said once
    assert plan(j, T0, T0 + timedelta(hours=1), disabled=h.disabled).run == ()
    never = job(T0, every=60, disable_after_failures=0)
    h = Health()
    for _ in range(50):
        h, disabled = after_outcome(never, h, fail)
        assert not disabled


@pytest.mark.parametrize("outcome", [Delivering(reason="rate limited")])
def test_non_terminal_outcomes_leave_the_backoff_alone(outcome: Delivering) -> None:
    h = Health(failures=2)
    assert after_outcome(job(T0, every=60), h, outcome) == (h, False)


def test_a_reload_that_changes_the_expression_follows_it_from_the_reload_instant() -> None:
    loop = Loop(job(T0, cron="0 * * * *"), FakeClock(T0))
    loop.run_until(_hour(3) + timedelta(minutes=10), TICK)
    reload_at = loop.clock.now()
    same_timing = parse_job({"name": "j", "prompt": "new words", "cron": "0 * * * *"})
    kept, bound = redefine(loop.job, same_timing, loop.bound, reload_at)
    assert (kept.created_at, bound, kept.prompt) == (loop.job.created_at, _hour(3), "new words")
    retimed = parse_job({"name": "j", "prompt": "do it", "cron": "*/20 * * * *"})
    loop.job, loop.bound = redefine(loop.job, retimed, loop.bound, reload_at)
    loop.run_until(_hour(4) + timedelta(minutes=10), TICK)
    minutes = [(t.hour, t.minute) for t in loop.runs]
    assert minutes == [(1, 0), (2, 0), (3, 0), (3, 20), (3, 40), (4, 0)]
    every = parse_job({"name": "j", "prompt": "do it", "every": "30m"})
    anchored, _ = redefine(loop.job, every, loop.bound, reload_at + timedelta(seconds=0.4))
    assert anchored.created_at == reload_at  # whole seconds: every's anchor is the reload instant
    fresh, none = redefine(None, every, None, reload_at)
    assert fresh.created_at == reload_at and none is None
