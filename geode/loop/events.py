"""Turn events with a per-session sequence number, sent to the configured sink (never fatal to the turn).

A tool's ``tool_start`` is held by a batching sink (geode/loop/event_batch.py) so a fast tool's events ride
the next round's list; the turn's thread, waiting for the tool, sends what is held once it has waited
:data:`TOOL_HOLD_S` (:func:`flush_held`): a slow tool's start reaches the user within that bound, and a fast
tool costs no wake at all (the wait it times is the one the turn does anyway)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from contextvars import ContextVar, Token
from typing import Any

from geode.loop.ports import EventSink
from geode.metrics import record as metrics
from geode.protocol.turns import TurnEvent, TurnEventKind
from geode.providers.events import ProviderEvent
from geode.providers.types import ProviderError, ProviderErrorKind

log = logging.getLogger(__name__)

# A resumed turn continues numbering this far past the last checkpointed seq, so events re-sent by a new
# incarnation never reuse numbers an older incarnation already emitted after its last save.
RESUME_SEQ_GAP = 1_000_000
# how long the turn's thread waits for a tool before it sends the held tool_start (a read-only tool: ~1-2 ms)
TOOL_HOLD_S = 0.01


class EventStream:
    """Stamps ``seq`` (monotonic per session) and forwards to the sink; thread-safe."""

    def __init__(self, sink: EventSink | None, session_id: str, turn_id: str, *, start_seq: int = 0) -> None:
        self.sink = sink
        self.session_id = session_id
        self.turn_id = turn_id
        self.seq = start_seq
        self._lock = threading.Lock()

    def emit(self, kind: TurnEventKind, **data: Any) -> None:
        with self._lock:
            self.seq += 1
            event = TurnEvent(
                session_id=self.session_id, turn_id=self.turn_id, seq=self.seq, kind=kind, data=data
            )
            if self.sink is None:
                return
            try:
                self.sink.emit(event)
            except Exception as exc:  # an event is observation: losing one never fails the turn
                log.warning("turn event %s dropped: %s", kind, exc)

    def flush(self) -> None:
        """Send what the sink holds now, if it holds events (a batching sink); never fatal to the turn."""
        flush = getattr(self.sink, "flush", None)
        if flush is None:
            return
        try:
            flush()
        except Exception as exc:  # an event is observation
            log.warning("held turn events not sent: %s", exc)


# The turn running on this thread: lets provider-level callbacks (HTTP retries, fallbacks, backoff sleeps
# inside the adapter's retrier) reach the right turn's stream and cancel event.
_current: ContextVar[tuple[EventStream, threading.Event] | None] = ContextVar("geode_loop_turn", default=None)


def bind_current(
    stream: EventStream, cancel: threading.Event
) -> Token[tuple[EventStream, threading.Event] | None]:
    return _current.set((stream, cancel))


def unbind_current(token: Token[tuple[EventStream, threading.Event] | None]) -> None:
    _current.reset(token)


def flush_held() -> None:
    """The turn on this thread waits for a tool longer than :data:`TOOL_HOLD_S`: send its held events now."""
    cur = _current.get()
    if cur is not None:
        cur[0].flush()


def tool_waits(poll_s: float) -> Iterator[float]:
    """The timeouts of the turn's wait for its tools: :data:`TOOL_HOLD_S`, then ``poll_s`` each time after
    sending what the turn holds (:func:`flush_held`: the tool's ``tool_start``, or one that came late)."""
    yield TOOL_HOLD_S
    while True:
        flush_held()
        yield poll_s


def relay_provider_event(event: ProviderEvent) -> None:
    """``on_event`` for providers: retries → llm_retry + retry_wait, fallbacks → fallback."""
    if event.type == "retry":
        metrics.provider_retry(event.provider)
    elif event.type == "fallback":
        metrics.provider_fallback(event.provider)
    cur = _current.get()
    if cur is None:
        return
    stream = cur[0]
    if event.type == "retry":
        of = f"/{event.max_attempts}" if event.max_attempts else ""
        why = f"{event.reason.replace('_', ' ')} error, attempt {event.attempt}{of}"
        message = f"retrying in {event.delay_s:.1f} s ({why})"  # ready for the CLI to print
        stream.emit(
            TurnEventKind.LLM_RETRY,
            attempt=event.attempt,
            error_kind=event.reason,
            source="provider",
            message=message,
        )
        stream.emit(TurnEventKind.RETRY_WAIT, seconds=event.delay_s, attempt=event.attempt)
    elif event.type == "fallback":
        stream.emit(
            TurnEventKind.FALLBACK, from_model=event.model, to_model=event.to_model, reason=event.reason
        )
    elif event.type == "gave_up":
        stream.emit(TurnEventKind.LLM_RETRY, attempt=event.attempt, error_kind=event.reason, gave_up=True)


def cancellable_sleep(seconds: float) -> None:
    """``sleep`` for a provider's retrier: a cancelled turn stops waiting (and the call ends cancelled)."""
    cur = _current.get()
    if cur is None:
        time.sleep(seconds)
        return
    if cur[1].wait(seconds):
        raise ProviderError(ProviderErrorKind.UNKNOWN, "cancelled during retry backoff", should_retry=False)
