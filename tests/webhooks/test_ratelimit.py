"""The webhooks rate limit: a token bucket per (route, client) on an injected clock, Retry-After in whole
seconds, memory bounded by an LRU cap on clients."""

from __future__ import annotations

from geode.webhooks.ratelimit import RateLimiter


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def test_a_burst_passes_then_the_next_waits_for_a_token() -> None:
    clock = Clock()
    rl = RateLimiter(clock=clock)
    assert [rl.take("r", "a", rate_per_minute=6, burst=3) for _ in range(3)] == [0, 0, 0]
    assert rl.take("r", "a", rate_per_minute=6, burst=3) == 10  # 6/min: a token every 10 s
    clock.t += 4.0
    assert rl.take("r", "a", rate_per_minute=6, burst=3) == 6  # refused calls take nothing
    clock.t += 6.0
    assert rl.take("r", "a", rate_per_minute=6, burst=3) == 0
    clock.t += 3600.0  # idle: refilled up to the burst, never beyond
    assert [rl.take("r", "a", rate_per_minute=6, burst=3) for _ in range(4)] == [0, 0, 0, 10]


def test_retry_after_is_at_least_one_second() -> None:
    rl = RateLimiter(clock=Clock())
    assert rl.take("r", "a", rate_per_minute=6000, burst=1) == 0
    assert rl.take("r", "a", rate_per_minute=6000, burst=1) == 1  # 0.01 s away: still "1"


def test_buckets_are_per_route_and_client() -> None:
    rl = RateLimiter(clock=Clock())
    assert rl.take("r", "a", rate_per_minute=60, burst=1) == 0
    assert rl.take("r", "a", rate_per_minute=60, burst=1) == 1
    assert rl.take("r", "b", rate_per_minute=60, burst=1) == 0
    assert rl.take("s", "a", rate_per_minute=60, burst=1) == 0


def test_zero_rate_is_unlimited_and_keeps_nothing() -> None:
    rl = RateLimiter(clock=Clock())
    assert all(rl.take("r", str(i), rate_per_minute=0, burst=1) == 0 for i in range(100))
    assert len(rl) == 0


def test_memory_is_bounded_by_forgetting_the_least_recently_seen_client() -> None:
    rl = RateLimiter(clock=Clock(), max_clients=3)
    for c in ("a", "b", "c"):
        assert rl.take("r", c, rate_per_minute=60, burst=1) == 0
    assert rl.take("r", "a", rate_per_minute=60, burst=1) == 1  # a is now the most recent
    assert rl.take("r", "d", rate_per_minute=60, burst=1) == 0  # b is forgotten
    assert len(rl) == 3
    assert rl.take("r", "a", rate_per_minute=60, burst=1) == 1  # a still limited
    assert rl.take("r", "b", rate_per_minute=60, burst=1) == 0  # b starts with a full bucket
    for i in range(10_000):
        rl.take("r", f"x{i}", rate_per_minute=60, burst=1)
    assert len(rl) == 3


def test_a_clock_stepping_back_refills_nothing() -> None:
    clock = Clock()
    rl = RateLimiter(clock=clock)
    assert rl.take("r", "a", rate_per_minute=60, burst=1) == 0
    clock.t -= 50.0
    assert rl.take("r", "a", rate_per_minute=60, burst=1) == 1
    clock.t += 51.0
    assert rl.take("r", "a", rate_per_minute=60, burst=1) == 0


def test_forget_route_drops_its_buckets_only() -> None:
    rl = RateLimiter(clock=Clock())
    rl.take("r", "a", rate_per_minute=60, burst=1)
    rl.take("s", "a", rate_per_minute=60, burst=1)
    rl.forget_route("r")
    assert rl.take("r", "a", rate_per_minute=60, burst=1) == 0
    assert rl.take("s", "a", rate_per_minute=60, burst=1) == 1
