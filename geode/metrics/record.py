"""What each process of the tree records for the Prometheus page: one small function per fact, called where
the fact happens (a turn ended, a tool call's outcome, a child restarted ...).

Off (no ``GEODE_METRICS_DIR`` in the environment, which ``geode serve`` sets only when ``[metrics] listen``
is set) every function returns at once and prometheus_client is never imported. On, the first call imports it
in multiprocess mode: ``PROMETHEUS_MULTIPROC_DIR`` is the same directory, so every child writes its own
files there and the supervisor's page sums them (a dead child's counters stay: totals never go backwards).
Labels are small closed sets: never a session id, a turn id or a tool argument."""

from __future__ import annotations

import os
import threading
from typing import Any

from geode.metrics import names as n

ENV = "GEODE_METRICS_DIR"  # set by `geode serve` for every child when [metrics] listen is set
_lock = threading.Lock()
_state: dict[str, Any] = {}  # "m": the instruments of this process once built, "off": True when off


def enabled() -> bool:
    """True when this process records (the tree was started with metrics on)."""
    return bool(os.environ.get(ENV))


def _m() -> Any:
    """The instruments, built on first use; None when metrics are off (nothing imported)."""
    m = _state.get("m")
    if m is not None or _state.get("off"):
        return m
    with _lock:
        if "m" not in _state and not _state.get("off"):
            directory = os.environ.get(ENV, "")
            if not directory:
                _state["off"] = True
                return None
            os.environ["PROMETHEUS_MULTIPROC_DIR"] = directory  # before prometheus_client.values loads
            from geode.metrics.instruments import Instruments

            _state["m"] = Instruments()
    return _state.get("m")


def entry_of(origin: str, mode: str) -> str:
    """A turn's entry path from its origin peer and mode: cli, mcp, chat, schedule, webhook, delegate or
    other."""
    base = origin.split("#", 1)[0].rsplit("/", 1)[-1]  # "w1/executor#2" (a worker host's) -> "executor"
    if base == "control":
        return "mcp" if mode == "HEADLESS" else "cli"
    return n.ENTRIES.get(base) or ("delegate" if base.startswith(("loop", "executor")) else "other")


def turn_ended(origin: str, mode: str, termination: str, seconds: float) -> None:
    if (m := _m()) is not None:
        entry = entry_of(origin, mode)
        m.turns.labels(entry, termination or "unknown").inc()
        m.turn_seconds.labels(entry).observe(max(0.0, seconds))


def model_call(seconds: float, outcome: str) -> None:
    if (m := _m()) is not None:
        m.model_seconds.labels(outcome).observe(max(0.0, seconds))


def tool_call(tool: str, known: bool, outcome: str) -> None:
    """``known``: the tool is built in or configured (its name is a label); else it counts as "other"."""
    if (m := _m()) is not None:
        m.tool_calls.labels(tool if known else "other", outcome).inc()


def receipts_uncertain(count: int) -> None:
    if (m := _m()) is not None:
        m.uncertain.set(count)


def child_started(child: str, incarnation: int) -> None:
    if (m := _m()) is not None:
        m.incarnation.labels(child).set(incarnation)


def child_restarted(child: str) -> None:
    if (m := _m()) is not None:
        m.restarts.labels(child).inc()


def child_exited(pid: int | None) -> None:
    """A child process ended: its live gauges leave the page (its counters stay)."""
    if pid and (m := _m()) is not None:
        m.process_dead(pid)


def lane_queue(depth: int) -> None:
    if (m := _m()) is not None:
        m.queue_depth.set(depth)


def admission_wait(seconds: float) -> None:
    if (m := _m()) is not None:
        m.admission_wait.observe(max(0.0, seconds))


def messenger_post(platform: str, outcome: str) -> None:
    if (m := _m()) is not None:
        m.posts.labels(platform, outcome).inc()


def rate_limit_wait(platform: str, seconds: float) -> None:
    if (m := _m()) is not None:
        m.rate_waits.labels(platform).inc()
        m.rate_wait_seconds.labels(platform).inc(max(0.0, seconds))


def provider_retry(provider: str) -> None:
    if (m := _m()) is not None:
        m.retries.labels(n.provider_label(provider)).inc()


def provider_fallback(provider: str) -> None:
    if (m := _m()) is not None:
        m.fallbacks.labels(n.provider_label(provider)).inc()


def scheduler_lag(seconds: float) -> None:
    if (m := _m()) is not None:
        m.scheduler_lag.observe(max(0.0, seconds))


def webhook_intake(outcome: str) -> None:
    if (m := _m()) is not None:
        m.intakes.labels(outcome).inc()
