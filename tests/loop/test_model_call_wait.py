"""The turn's thread waiting for its model call is not woken every 50 ms (issue 34 session 9): with the
turn's :class:`CancelFlag` it blocks until the outcome, a cancel, or streamed text held back by the delta
coalescer (then it ticks every 50 ms while text is held, as before). A plain ``threading.Event`` is polled."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from geode.loop import call
from geode.loop.events import EventStream
from geode.loop.state import CancelFlag
from geode.protocol.turns import TurnEvent

_interruptible: Any = call._interruptible


class _Sink:
    def __init__(self) -> None:
        self.events: list[tuple[float, TurnEvent]] = []

    def emit(self, event: TurnEvent) -> None:
        self.events.append((time.monotonic(), event))


def test_a_call_with_the_turns_flag_wakes_its_caller_only_for_the_outcome() -> None:
    ticks: list[int] = []
    assert _interruptible(
        lambda: time.sleep(0.3) or "answer", CancelFlag(), tick=lambda: ticks.append(1)
    ) == ("answer")
    assert ticks == []  # before: a tick every 50 ms (6 for this call)


def test_a_plain_event_is_still_polled() -> None:
    ticks: list[int] = []
    assert (
        _interruptible(lambda: time.sleep(0.3) or "x", threading.Event(), tick=lambda: ticks.append(1)) == "x"
    )
    assert len(ticks) >= 2


@pytest.mark.parametrize("early", [True, False], ids=["set before", "set during"])
def test_a_cancel_ends_the_wait_at_once(early: bool) -> None:
    cancel, release = CancelFlag(), threading.Event()
    if early:
        cancel.set()
    else:
        threading.Timer(0.1, cancel.set).start()
    t0 = time.monotonic()
    with pytest.raises(call._Cancelled):
        _interruptible(lambda: release.wait(30), cancel)
    assert time.monotonic() - t0 < 5  # not the call's 30 s
    release.set()
    assert not cancel._watchers  # nothing left watching the flag


def test_held_streamed_text_goes_out_before_the_call_ends() -> None:
    """The second delta comes within the coalescer's interval and is held; the caller, told, ticks it out
    ~50 ms later, not when the call ends 0.6 s later."""
    sink = _Sink()
    deltas = call._DeltaCoalescer(EventStream(sink, "s", "t"))  # type: ignore[arg-type]

    def stream() -> str:
        deltas.add("first ")  # out at once
        deltas.add("second")  # held
        time.sleep(0.6)
        return "done"

    t0 = time.monotonic()
    assert _interruptible(stream, CancelFlag(), tick=deltas.tick, deltas=deltas) == "done"
    texts = [(at - t0, e.data["text"]) for at, e in sink.events]
    assert [t for _, t in texts] == ["first ", "second"]
    assert texts[1][0] < 0.4, texts
    assert deltas.on_hold is None
