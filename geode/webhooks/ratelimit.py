"""The webhooks rate limit: one token bucket per (route, client address), refilled at the route's
``rate_per_minute`` up to ``rate_burst`` tokens. Memory is bounded: at most ``max_clients`` buckets are kept,
the least recently used one is forgotten first (a forgotten client starts again with a full bucket, which is
what an idle client would have anyway). The clock is injectable (monotonic seconds)."""

from __future__ import annotations

import math
import time
from collections import OrderedDict
from collections.abc import Callable

MAX_CLIENTS = 10_000


class _Bucket:
    __slots__ = ("at", "tokens")

    def __init__(self, tokens: float, at: float) -> None:
        self.tokens, self.at = tokens, at


class RateLimiter:
    """Token buckets keyed by (route, client). Used from one event loop (no lock)."""

    def __init__(
        self, *, clock: Callable[[], float] = time.monotonic, max_clients: int = MAX_CLIENTS
    ) -> None:
        if max_clients < 1:
            raise ValueError("max_clients must be at least 1")
        self.clock, self.max_clients = clock, max_clients
        self._buckets: OrderedDict[tuple[str, str], _Bucket] = OrderedDict()

    def __len__(self) -> int:
        return len(self._buckets)

    def take(self, route: str, client: str, *, rate_per_minute: float, burst: int) -> int:
        """Take one token: 0 when the request may pass, else the whole seconds to wait (``Retry-After``,
        at least 1) until a token is back. ``rate_per_minute <= 0``: unlimited (nothing kept)."""
        if rate_per_minute <= 0:
            return 0
        capacity = float(max(burst, 1))
        per_s = rate_per_minute / 60.0
        now = self.clock()
        key = (route, client)
        bucket = self._buckets.get(key)
        if bucket is None:
            bucket = _Bucket(capacity, now)
            self._buckets[key] = bucket
            if len(self._buckets) > self.max_clients:
                self._buckets.popitem(last=False)
        else:
            self._buckets.move_to_end(key)
            elapsed = max(now - bucket.at, 0.0)  # a clock that steps back refills nothing
            bucket.tokens = min(capacity, bucket.tokens + elapsed * per_s)
            bucket.at = max(now, bucket.at)
        if bucket.tokens >= 1.0:
            bucket.tokens -= 1.0
            return 0
        return max(1, math.ceil((1.0 - bucket.tokens) / per_s))

    def forget_route(self, route: str) -> None:
        """Drop a route's buckets (its limits changed or it was removed at a reload)."""
        for key in [k for k in self._buckets if k[0] == route]:
            del self._buckets[key]
