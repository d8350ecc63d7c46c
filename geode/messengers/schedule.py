"""Pacing of a messenger poller: jittered exponential backoff, the platform's rate-limit gate (a 429's
``retry_after`` holds every next call), and the counters ``geode status`` shows for each poller."""

from __future__ import annotations

import asyncio
import random
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

State = Literal["starting", "polling", "backoff", "conflict", "disabled", "failed", "stopped"]


class Backoff:
    """Full-jitter exponential backoff: the n-th delay is uniform in [base·2^n / 2, base·2^n], capped."""

    def __init__(self, base_s: float = 0.5, max_s: float = 30.0, rng: random.Random | None = None) -> None:
        self.base_s = base_s
        self.max_s = max_s
        self.failures = 0
        self._rng = rng or random.Random()

    def next(self) -> float:
        top = min(self.max_s, self.base_s * (2**self.failures))
        self.failures = min(self.failures + 1, 30)
        return self._rng.uniform(top / 2, top)

    def reset(self) -> None:
        self.failures = 0


class RateGate:
    """No platform call before ``not_before`` (monotonic): set from a 429's ``retry_after``."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.not_before = 0.0

    def hold(self, seconds: float) -> None:
        self.not_before = max(self.not_before, self.clock() + max(0.0, seconds))

    def remaining(self) -> float:
        return max(0.0, self.not_before - self.clock())

    async def wait(self) -> None:
        while (left := self.remaining()) > 0:
            await asyncio.sleep(left)


@dataclass
class PollerStatus:
    """What one platform's poller reports (``runtime.status`` detail ``platforms``). Written by the poller's
    loop thread, read by any thread (plain attribute reads of a snapshot)."""

    platform: str
    state: State = "starting"
    reason: str = ""
    last_poll_ok_at: float | None = None  # wall clock
    started_at: float | None = None  # wall clock: the platform answered and the journal is loaded
    cursor: int | str | None = None  # Telegram's offset (a number); push platforms have none
    messages_in: int = 0
    ignored: Counter[str] = field(default_factory=Counter)
    unhandled: Counter[str] = field(default_factory=Counter)  # messages not handled, by reason (answered)
    replies_out: int = 0
    last_error: str = ""
    restarts: int = 0
    pending_replies: int = 0
    approvals_open: int = 0
    conflicts: int = 0
    rate_limited: int = 0
    uncertain_replies: int = 0  # reply receipts still uncertain (kept for the operator; see observe.py)

    def started(self) -> None:
        """The poller's start succeeded: it is polling now, though a long poll may not answer for a while."""
        self.state = "polling"
        self.started_at = time.time()

    def error(self, state: State, message: str) -> None:
        self.state = state
        self.last_error = message[:500]

    def view(self) -> dict[str, Any]:
        return {
            "platform": self.platform,
            "state": self.state,
            "reason": self.reason,
            "last_poll_ok_at": self.last_poll_ok_at,
            "started_at": self.started_at,
            "cursor": self.cursor,
            "in": self.messages_in,
            "ignored": dict(self.ignored),
            "unhandled": dict(self.unhandled),
            "replies_out": self.replies_out,
            "last_error": self.last_error,
            "restarts": self.restarts,
            "pending_replies": self.pending_replies,
            "approvals_open": self.approvals_open,
            "uncertain_replies": self.uncertain_replies,
            "conflicts": self.conflicts,
            "rate_limited": self.rate_limited,
        }
