"""Per-route counters of the webhooks HTTP app since the child started: accepted (202), replayed (200),
rejected by reason, rate limited (429). The app counts on its event loop; the child reads a snapshot from
another thread (``geode webhooks``, ``geode status``), so every access holds one lock. A request to an
unknown path has no route: it is counted once, as ``unrouted``."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from geode.metrics import record as metrics

# the rejection reasons (one per refusal the app answers; 429 is counted as rate_limited, not here)
NOT_ALLOWED = "method_not_allowed"  # 405
TOO_LARGE = "body_too_large"  # 413
AUTH_MISSING = "missing"  # 401: no signature / token (auth.verify's reasons, as they are)
INVALID_JSON = "invalid_json"  # 400
NO_DELIVERY_ID = "missing_delivery_id"  # 400: the route's delivery header is absent
BAD_DELIVERY_ID = "bad_delivery_id"  # 400: the delivery header is not 1-256 printable characters
QUEUE_FULL = "queue_full"  # 503: the route's queue is at queue_max
STORE_ERROR = "store_error"  # 503: the intake could not be recorded
BUSY = "busy"  # 503: every worker thread is taken and the backlog is at its bound
NO_SECRET = "no_secret"  # 503: the route's secret is not in $GEODE_HOME/.env


@dataclass
class RouteCounts:
    """One route's counters (a copy when it comes from :meth:`Counters.snapshot`)."""

    accepted: int = 0
    replayed: int = 0
    rate_limited: int = 0
    rejected: dict[str, int] = field(default_factory=dict)

    def copy(self) -> RouteCounts:
        return RouteCounts(self.accepted, self.replayed, self.rate_limited, dict(self.rejected))


class Counters:
    """Thread-safe counters per route name."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._routes: dict[str, RouteCounts] = {}
        self._unrouted = 0

    def _route(self, route: str) -> RouteCounts:
        counts = self._routes.get(route)
        if counts is None:
            counts = self._routes[route] = RouteCounts()
        return counts

    def accepted(self, route: str) -> None:
        with self._lock:
            self._route(route).accepted += 1
        metrics.webhook_intake("accepted")

    def replayed(self, route: str) -> None:
        with self._lock:
            self._route(route).replayed += 1
        metrics.webhook_intake("replayed")

    def rate_limited(self, route: str) -> None:
        with self._lock:
            self._route(route).rate_limited += 1
        metrics.webhook_intake("rate_limited")

    def rejected(self, route: str, reason: str) -> None:
        with self._lock:
            rejected = self._route(route).rejected
            rejected[reason] = rejected.get(reason, 0) + 1
        metrics.webhook_intake("rejected")

    def unrouted(self) -> None:
        with self._lock:
            self._unrouted += 1
        metrics.webhook_intake("unrouted")

    def snapshot(self) -> dict[str, RouteCounts]:
        """A copy of every route's counters (routes that saw no request are absent)."""
        with self._lock:
            return {name: counts.copy() for name, counts in self._routes.items()}

    def route(self, route: str) -> RouteCounts:
        """A copy of one route's counters (zeros when it saw no request)."""
        with self._lock:
            counts = self._routes.get(route)
            return counts.copy() if counts is not None else RouteCounts()

    @property
    def unrouted_count(self) -> int:
        with self._lock:
            return self._unrouted
