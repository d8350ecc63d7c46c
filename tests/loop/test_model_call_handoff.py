"""The model call's hand-off to its thread builds no Condition per call (issue 34, session 5): the outcome
comes back through a SimpleQueue (geode/loop/call.py ``_interruptible``), and the call still returns its
answer, re-raises its error on the turn's thread, and a cancel still ends the wait at once."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from geode.loop import call
from geode.loop.reused_threads import MODEL_CALLS
from geode.providers.types import ProviderError, ProviderErrorKind
from tests.waiting import poll_for

_interruptible: Any = call._interruptible  # any callable's outcome, not only a ModelResponse


def _counting_conditions(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    built: list[int] = []

    class Counted(threading.Condition):
        def __init__(self, *a: Any, **k: Any) -> None:
            built.append(1)
            super().__init__(*a, **k)

    monkeypatch.setattr(threading, "Condition", Counted)
    return built


def test_twenty_model_calls_build_no_condition(monkeypatch: pytest.MonkeyPatch) -> None:
    cancel = threading.Event()
    assert _interruptible(lambda: "warm", cancel) == "warm"  # the reused thread exists now
    built = _counting_conditions(monkeypatch)
    answers, during = [], 0
    for i in range(20):
        poll_for(lambda: MODEL_CALLS.idle() >= 1, 10, what="the model-call thread idle")
        before = len(built)  # (the wait above builds its own)
        answers.append(_interruptible(lambda i=i: f"answer {i}", cancel))
        during += len(built) - before
    assert answers == [f"answer {i}" for i in range(20)]
    assert during == 0, f"{during} Conditions built for 20 calls (one Event each before)"


def test_the_calls_error_is_raised_on_the_callers_thread() -> None:
    err = ProviderError(ProviderErrorKind.RATE_LIMIT, "slow down")

    def fails() -> Any:
        raise err

    with pytest.raises(ProviderError) as caught:
        _interruptible(fails, threading.Event())
    assert caught.value is err


def test_a_cancel_ends_the_wait_while_the_call_still_runs() -> None:
    cancel, release, ticks = threading.Event(), threading.Event(), []
    cancel.set()
    t0 = time.monotonic()
    with pytest.raises(call._Cancelled):
        _interruptible(lambda: release.wait(30), cancel, tick=lambda: ticks.append(1))
    assert time.monotonic() - t0 < 5  # one 50 ms wait, not the call's 30 s
    release.set()
