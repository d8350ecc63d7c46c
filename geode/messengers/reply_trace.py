"""The span of a chat turn's reply post, in the turn's trace: lanes sends a turn's ``turn_done`` under the
turn's trace context (the one its record keeps), the poller notes it here on the bus thread that got it, and
the outbox posts the reply inside ``messengers.reply`` (the executor's ``messenger.deliver`` is its child).
Nothing is kept when tracing is off (no context arrives)."""

from __future__ import annotations

import threading

from geode.telemetry import spans

MAX_KEPT = 1024  # turns whose turn_done arrived and whose reply is not posted yet


class ReplyTraces:
    """turn id → the trace context its ``turn_done`` came under (thread-safe, bounded)."""

    def __init__(self) -> None:
        self._by_turn: dict[str, str] = {}
        self._lock = threading.Lock()

    def note(self, turn_id: str, traceparent: str | None) -> None:
        if traceparent is None:
            return
        with self._lock:
            if len(self._by_turn) >= MAX_KEPT:
                self._by_turn.pop(next(iter(self._by_turn)))
            self._by_turn[turn_id] = traceparent

    def span(self, turn_id: str, platform: str) -> spans.Span:
        """``messengers.reply`` under the turn's trace (the no-op span when none was noted)."""
        with self._lock:
            parent = self._by_turn.pop(turn_id, None)
        if parent is None:
            return spans.NOOP
        return spans.span(
            "messengers.reply", {"geode.platform": platform, "geode.turn_id": turn_id}, parent=parent
        )
