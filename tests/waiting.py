"""The one polling wait of the test suite: wait on a condition with a deadline instead of sleeping."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def poll_for(
    predicate: Callable[[], T],
    timeout_s: float = 15.0,
    *,
    interval_s: float = 0.02,
    what: str = "condition",
    swallow: tuple[type[BaseException], ...] = (),
) -> T:
    """Call ``predicate`` until it returns something truthy and return that value.

    Fails with ``AssertionError("timed out after Ns waiting for <what>; last value: ...")`` once
    ``timeout_s`` has passed. Exceptions of the types in ``swallow`` count as "not yet" (for example a
    peer that is not listening yet); any other exception propagates at once.
    """
    end = time.monotonic() + timeout_s
    tick = threading.Event()  # Event.wait rather than time.sleep: never a bare sleep in a test
    last: object = None
    while True:
        try:
            last = predicate()
        except swallow as exc:
            last = exc
        else:
            if last:
                return last
        if time.monotonic() >= end:
            seen = repr(last)[:1500]
            raise AssertionError(f"timed out after {timeout_s:g}s waiting for {what}; last value: {seen}")
        tick.wait(interval_s)
