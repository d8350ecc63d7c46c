"""Fuzz budgets: small and derandomized in CI; ``GEODE_FUZZ_EXAMPLES=N`` raises every budget (a long run)."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st

ENV = "GEODE_FUZZ_EXAMPLES"


def examples(default: int) -> int:
    """``default`` unless ``GEODE_FUZZ_EXAMPLES`` asks for more (it never lowers a budget)."""
    raw = os.environ.get(ENV, "").strip()
    return max(default, int(raw)) if raw.isdigit() else default


def long_run() -> bool:
    return examples(0) > 0


def fuzz(default: int, *, shrink: bool = True) -> Any:
    """``@settings`` for one fuzz target: bounded, no deadline per example, reproducible in CI.

    ``shrink=False`` for targets against a live process whose state carries over between examples: a
    failure there depends on history, so shrinking cannot reproduce it and only burns time; the first
    failing example is reported as found.
    """
    phases = [Phase.explicit, Phase.reuse, Phase.generate] + ([Phase.shrink] if shrink else [])
    return settings(
        phases=phases,
        max_examples=examples(default),
        deadline=None,
        derandomize=not long_run(),  # CI: the same examples every run; a long run explores
        database=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )


scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | st.floats()
    | st.text(max_size=40)
    | st.binary(max_size=40)
)
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
    max_leaves=12,
)


class Lines(logging.Handler):
    """Collects the log records at WARNING and above while installed (see :func:`logged`)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    def clear(self) -> None:
        self.records.clear()


@contextmanager
def logged(*names: str) -> Iterator[Lines]:
    h = Lines()
    loggers = [logging.getLogger(n) for n in names]
    for lg in loggers:
        lg.addHandler(h)
    try:
        yield h
    finally:
        for lg in loggers:
            lg.removeHandler(h)
