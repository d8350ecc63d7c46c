"""The figures ``geode top`` shows, computed from one parsed /metrics page (a dict of samples by name and
labels): totals by label, latency quantiles estimated from histogram buckets, and per-minute rates between
two pages. Pure: no prometheus_client here (the CLI parses the page with its parser)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from geode.metrics import names as n

Labels = tuple[tuple[str, str], ...]
Page = Mapping[tuple[str, Labels], float]


def total(page: Page, name: str, **labels: str) -> float:
    """The sum of ``name``'s samples whose labels include ``labels``."""
    return sum(v for (nm, ls), v in page.items() if nm == name and _has(ls, labels))


def by_label(page: Page, name: str, label: str) -> dict[str, float]:
    """``name`` summed per value of ``label`` (e.g. turns per termination reason)."""
    out: dict[str, float] = {}
    for (nm, ls), v in page.items():
        if nm == name and (key := dict(ls).get(label)) is not None:
            out[key] = out.get(key, 0.0) + v
    return out


def quantile(page: Page, histogram: str, q: float) -> float | None:
    """The ``q`` quantile of a histogram (all label sets summed), linearly within its bucket; None when it
    has no observation."""
    buckets: dict[float, float] = {}
    for (nm, ls), v in page.items():
        if nm == f"{histogram}_bucket":
            le = float(dict(ls).get("le", "inf").replace("+Inf", "inf"))
            buckets[le] = buckets.get(le, 0.0) + v
    edges = sorted(buckets)
    count = buckets.get(math.inf, 0.0)
    if not edges or count <= 0:
        return None
    rank, low, below = q * count, 0.0, 0.0
    for le in edges:
        if buckets[le] >= rank:
            if math.isinf(le):
                return low  # beyond the last finite bucket: its edge is all that is known
            inside = buckets[le] - below
            return low + (le - low) * ((rank - below) / inside if inside else 1.0)
        low, below = le, buckets[le]
    return low


def per_minute(now: Page, before: Page | None, name: str, seconds: float, **labels: str) -> float | None:
    """The rate of counter ``name`` between two pages ``seconds`` apart (None without an earlier page)."""
    if before is None or seconds <= 0:
        return None
    return max(0.0, total(now, name, **labels) - total(before, name, **labels)) * 60.0 / seconds


def figures(page: Page, before: Page | None = None, seconds: float = 0.0) -> dict[str, Any]:
    """Everything ``geode top`` shows (and ``--json`` prints), from one page (and the one before it)."""
    return {
        "turns": {
            "total": total(page, n.TURNS),
            "per_minute": per_minute(page, before, n.TURNS, seconds),
            "by_termination": by_label(page, n.TURNS, "termination"),
            "by_entry": by_label(page, n.TURNS, "entry"),
            "latency_p50_s": quantile(page, n.TURN_SECONDS, 0.5),
            "latency_p95_s": quantile(page, n.TURN_SECONDS, 0.95),
        },
        "model_calls": {
            "total": total(page, f"{n.MODEL_SECONDS}_count"),
            "errors": total(page, f"{n.MODEL_SECONDS}_count", outcome="error"),
            "latency_p50_s": quantile(page, n.MODEL_SECONDS, 0.5),
            "latency_p95_s": quantile(page, n.MODEL_SECONDS, 0.95),
            "retries": total(page, n.RETRIES),
            "fallbacks": total(page, n.FALLBACKS),
        },
        "tool_calls": {
            "total": total(page, n.TOOL_CALLS),
            "by_outcome": by_label(page, n.TOOL_CALLS, "outcome"),
        },
        "receipts_uncertain": total(page, n.UNCERTAIN),
        "lanes": {
            "queue_depth": total(page, n.QUEUE_DEPTH),
            "admission_wait_p95_s": quantile(page, n.ADMISSION_WAIT, 0.95),
        },
        "children": {
            "restarts": by_label(page, n.RESTARTS, "child"),
            "incarnations": by_label(page, n.INCARNATION, "child"),
        },
        "messengers": {
            "replies_by_outcome": by_label(page, n.POSTS, "outcome"),
            "rate_limit_waits": total(page, n.RATE_WAITS),
        },
        "webhooks": {"intakes_by_outcome": by_label(page, n.INTAKES, "outcome")},
        "scheduler": {"lag_p95_s": quantile(page, n.SCHEDULER_LAG, 0.95)},
    }


def _has(labels: Labels, wanted: Mapping[str, str]) -> bool:
    have = dict(labels)
    return all(have.get(k) == v for k, v in wanted.items())
