"""Bounded retries with full-jitter backoff, server hints (Retry-After, x-should-retry) and injectable time.

Defaults follow the reference: 3 attempts, base 2 s, cap 30 s; Retry-After above 60 s stops retrying.
"""

from __future__ import annotations

import random
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

from geode.providers.classify import HINTS, classify
from geode.providers.events import EventCallback, ProviderEvent
from geode.providers.settings import RetryPolicy
from geode.providers.types import ProviderError

T = TypeVar("T")


class CallbackAborted(Exception):
    """Raised around an exception thrown by the caller's ``on_delta``; the retrier re-raises the original."""

    def __init__(self, original: Exception) -> None:
        super().__init__(str(original))
        self.original = original


@dataclass
class Retrier:
    """Runs one provider call under a :class:`RetryPolicy`. ``sleep`` and ``rng`` are injectable for tests."""

    policy: RetryPolicy = field(default_factory=RetryPolicy)
    sleep: Callable[[float], None] = time.sleep
    rng: random.Random = field(default_factory=random.Random)
    on_event: EventCallback | None = None
    delays: deque[float] = field(default_factory=lambda: deque(maxlen=100))  # recent delays, for assertions

    def delay_for(self, err: ProviderError, failure: int) -> float | None:
        """The delay before the next attempt, or None to stop."""
        if not err.retryable or failure >= self.policy.max_attempts:
            return None
        jitter = self.rng.uniform(0.0, self.policy.backoff_cap(failure))
        if err.retry_after_s is not None:
            if err.retry_after_s > self.policy.max_retry_after_s:
                return None
            return max(jitter, err.retry_after_s)
        return jitter

    def run(
        self,
        attempt: Callable[[int], T],
        *,
        provider: str,
        model: str,
        on_event: EventCallback | None = None,
    ) -> tuple[T, int]:
        """Call ``attempt(n)`` (n = 1, 2, …) until it returns, or raise the terminal ProviderError.

        Events go to the retrier's ``on_event`` and to this call's ``on_event`` (e.g. the current turn's).
        """

        def emit(event: ProviderEvent) -> None:
            for cb in (self.on_event, on_event):
                if cb is not None:
                    cb(event)

        failure = 0
        while True:
            try:
                return attempt(failure + 1), failure + 1
            except CallbackAborted as aborted:
                raise aborted.original from None
            except Exception as exc:  # classified below; anything unexpected becomes UNKNOWN
                err = classify(exc)
                failure += 1
                delay = self.delay_for(err, failure)
                if delay is None:
                    raise self._terminal(err, failure, provider, model, emit) from exc
                emit(
                    ProviderEvent(
                        type="retry",
                        provider=provider,
                        model=model,
                        attempt=failure,
                        max_attempts=self.policy.max_attempts,
                        reason=err.kind.value,
                        delay_s=delay,
                        detail=err.message[:200],
                    )
                )
                self.delays.append(delay)
                self.sleep(delay)

    def _terminal(
        self, err: ProviderError, attempts: int, provider: str, model: str, emit: EventCallback
    ) -> ProviderError:
        was_retryable = err.retryable
        err.attempts = attempts
        err.should_retry = False  # final: this policy is the only one; callers must not retry again
        err.hint = err.hint or HINTS[err.kind]
        limit = self.policy.max_retry_after_s
        if was_retryable and err.retry_after_s is not None and err.retry_after_s > limit:
            err.hint = f"{err.hint} (server asked to wait {err.retry_after_s:.0f} s; not waiting)"
        if attempts > 1 or was_retryable:
            emit(
                ProviderEvent(
                    type="gave_up",
                    provider=provider,
                    model=model,
                    attempt=attempts,
                    reason=err.kind.value,
                    detail=err.message[:200],
                )
            )
        return err
