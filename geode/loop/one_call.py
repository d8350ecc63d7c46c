"""One tool call on a reused thread, waited on by the turn's thread without a Future (issue 34, session 5).

A round's single call (and each call of a batch run strictly one after another) is what most rounds send;
it went through ``ReusedThreads.map_ordered`` and ``concurrent.futures.wait``: a Future, a waiter and their
Conditions built, notified and waited on per call. Here the outcome comes back through a ``SimpleQueue``
(C-level put and timed get), with the same cancel rule as :func:`geode.loop.batch._await`: the wait is
polled every 50 ms; once the turn is cancelled the executor is asked to stop the turn's calls and the real
outcome is awaited for ``grace_s``; a call still running after that is reported with an unknown outcome.
The first wait is only ``TOOL_HOLD_S``: a call not answered by then has the turn's held events (its
``tool_start``) sent, and so at each poll after it (geode.loop.events.tool_waits).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from queue import Empty, SimpleQueue
from typing import Any

from geode.loop.events import tool_waits
from geode.loop.reused_threads import TOOL_CALLS
from geode.tools.spec import ToolCall, ToolResult

POLL_S = 0.05


def await_one(
    job: Callable[[], ToolResult],
    call: ToolCall,
    cancel: threading.Event,
    on_cancel: Callable[[], None],
    grace_s: float,
) -> ToolResult:
    """``job()`` on a :data:`TOOL_CALLS` thread; its result (its exception re-raised here), or the unknown
    outcome when the turn was cancelled and the call did not end within ``grace_s`` of the cancel."""
    box: SimpleQueue[tuple[bool, Any]] = SimpleQueue()

    def target() -> None:
        try:
            out: tuple[bool, Any] = (True, job())
        except BaseException as exc:  # re-raised on the turn's thread, as Future.result() did
            out = (False, exc)
        box.put(out)

    TOOL_CALLS.run(target)
    waits = tool_waits(POLL_S)  # a fast tool answers within the first: its tool_start rides the next round's
    while True:
        try:
            ok, value = box.get(timeout=next(waits))
            break
        except Empty:
            if not cancel.is_set():
                continue
        on_cancel()
        try:
            ok, value = box.get(timeout=grace_s)
            break
        except Empty:
            return ToolResult.error(
                call,
                "the turn was cancelled while this call ran; its outcome is unknown",
                "cancelled_outcome_unknown",
                executed=None,
            )
    if not ok:
        raise value
    return value  # type: ignore[no-any-return]
