"""Retry policy arithmetic and classification of non-HTTP failures, with injected time and randomness."""

from __future__ import annotations

import email.utils
import random

import pytest

from geode.providers.classify import classify, parse_retry_after, parse_should_retry
from geode.providers.retry import Retrier
from geode.providers.settings import RetryPolicy
from geode.providers.types import ProviderError, ProviderErrorKind

K = ProviderErrorKind


def test_full_jitter_bounds_and_cap():
    policy = RetryPolicy(max_attempts=8)
    assert [policy.backoff_cap(n) for n in range(1, 7)] == [2.0, 4.0, 8.0, 16.0, 30.0, 30.0]
    r = Retrier(policy=policy, rng=random.Random(3))
    err = ProviderError(K.OVERLOADED, "x")
    for n in range(1, 8):
        d = r.delay_for(err, n)
        assert d is not None and 0.0 <= d <= policy.backoff_cap(n)
    assert r.delay_for(err, 8) is None  # attempts exhausted


def test_delays_are_asserted_not_slept():
    slept: list[float] = []
    calls = []

    def attempt(n: int) -> str:
        calls.append(n)
        if n < 3:
            raise ProviderError(K.RATE_LIMIT, "slow")
        return "ok"

    r = Retrier(sleep=slept.append, rng=random.Random(11))
    assert r.run(attempt, provider="p", model="m") == ("ok", 3)
    expected_rng = random.Random(11)
    assert slept == [expected_rng.uniform(0, 2.0), expected_rng.uniform(0, 4.0)] == list(r.delays)
    assert calls == [1, 2, 3]


def test_retry_after_floor_and_ceiling():
    r = Retrier(rng=random.Random(0))
    assert r.delay_for(ProviderError(K.RATE_LIMIT, "x", retry_after_s=9.0), 1) == 9.0
    assert r.delay_for(ProviderError(K.RATE_LIMIT, "x", retry_after_s=60.0), 1) == 60.0
    assert r.delay_for(ProviderError(K.RATE_LIMIT, "x", retry_after_s=61.0), 1) is None
    assert r.delay_for(ProviderError(K.RATE_LIMIT, "x", should_retry=False), 1) is None
    assert r.delay_for(ProviderError(K.AUTH, "x"), 1) is None


def test_retry_after_parsing():
    assert parse_retry_after({"retry-after": "3"}) == 3.0
    assert parse_retry_after({"retry-after-ms": "250"}) == 0.25
    date = email.utils.formatdate(1_000_030, usegmt=True)
    assert parse_retry_after({"retry-after": date}, now=1_000_000) == pytest.approx(30.0)
    assert parse_retry_after({"retry-after": "soon"}) is None
    assert parse_retry_after({}) is None
    assert parse_should_retry({"x-should-retry": "false"}) is False
    assert parse_should_retry({"x-should-retry": "true"}) is True
    assert parse_should_retry({}) is None


@pytest.mark.parametrize(
    ("exc", "kind"),
    [
        (TimeoutError("read timed out"), K.TIMEOUT),
        (ConnectionRefusedError("refused"), K.CONNECTION),
        (ConnectionResetError("reset"), K.CONNECTION),
        (ValueError("weird"), K.UNKNOWN),
    ],
)
def test_classify_plain_exceptions(exc, kind):
    err = classify(exc)
    assert err.kind is kind and err.hint


def test_unknown_errors_are_terminal():
    r = Retrier(sleep=lambda s: None)
    with pytest.raises(ProviderError) as info:
        r.run(lambda n: (_ for _ in ()).throw(ValueError("bug")), provider="p", model="m")
    assert info.value.kind is K.UNKNOWN and info.value.attempts == 1


def test_policy_from_config():
    p = RetryPolicy.from_config({"max_attempts": 5, "base_delay_s": 0.5})
    assert (p.max_attempts, p.base_delay_s, p.max_delay_s, p.max_retry_after_s) == (5, 0.5, 30.0, 60.0)
