"""The suite's own kit: poll_for returns the awaited value or names what it waited for; Child closes
its pipes once reaped."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from tests.processes import Child
from tests.waiting import poll_for


def test_poll_for_returns_the_first_truthy_value() -> None:
    calls: list[int] = []

    def third_time() -> list[int]:
        calls.append(1)
        return calls if len(calls) >= 3 else []

    assert poll_for(third_time, 5, interval_s=0) == [1, 1, 1]


def test_poll_for_fails_naming_what_it_waited_for_and_the_last_value() -> None:
    t0 = time.monotonic()
    expected = r"timed out after 0.2s waiting for the door to open; last value: 0"
    with pytest.raises(AssertionError, match=expected):
        poll_for(lambda: 0, 0.2, interval_s=0.01, what="the door to open")
    assert 0.2 <= time.monotonic() - t0 < 2


def test_poll_for_swallows_only_the_named_exceptions() -> None:
    attempts: list[int] = []

    def flaky() -> str:
        attempts.append(1)
        if len(attempts) < 3:
            raise ConnectionError("not listening yet")
        return "up"

    assert poll_for(flaky, 5, interval_s=0, swallow=(ConnectionError,)) == "up"
    with pytest.raises(KeyError):
        poll_for(lambda: {}["x"], 5, swallow=(ConnectionError,))


def test_child_closes_its_pipes_once_reaped() -> None:
    p = Child([sys.executable, "-c", "print('hi')"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert p.stdout is not None and p.stdout.readline() == b"hi\n"
    assert p.wait(10) == 0
    assert p.stdout.closed and p.stderr is not None and p.stderr.closed
