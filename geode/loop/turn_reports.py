"""What a loop worker tells lanes about a turn: its events (several to a ``turn.events`` frame, through the
turn's :class:`EventBatch`) and its ``turn.done``, which carries the events the loop still held at the end
(the termination among them) and is sent until lanes acknowledges it."""

from __future__ import annotations

import logging
import threading
import time

from geode.loop.event_batch import EventBatch, HoldTimer
from geode.protocol import turns
from geode.protocol.errors import BadRequest, GeodeError
from geode.protocol.transport import Transport

log = logging.getLogger(__name__)
LANES = "lanes"


class LanesSink:
    """Turn events as ``turn.event`` casts to lanes (which orders them per session by seq); a turn's
    events produced back to back as one ``turn.events`` cast (:meth:`send`, through the turn's
    :class:`EventBatch`)."""

    def __init__(self, transport: Transport) -> None:
        self.transport = transport
        self.hold = HoldTimer()

    def emit(self, event: turns.TurnEvent) -> None:
        self.transport.cast(LANES, turns.TURN_EVENT, event, session=event.session_id)

    def send(self, events: list[turns.TurnEvent]) -> None:
        if len(events) == 1:
            self.emit(events[0])
            return
        body = turns.TurnEvents(events=events)
        self.transport.cast(LANES, turns.TURN_EVENTS, body, session=events[0].session_id)

    def for_turn(self) -> EventBatch:
        return EventBatch(self.send, self.hold)


def report_done(
    sink: LanesSink, done: turns.TurnDone, stopped: threading.Event, *, give_up_s: float = 120.0
) -> None:
    """``done`` until lanes acknowledges (idempotent by turn id: lanes relays the events of the done it acts
    on, never a repeat's). A done refused as too large with its events sends the events alone first."""
    deadline, delay = time.monotonic() + give_up_s, 0.1
    while not stopped.is_set():
        try:
            sink.transport.call(LANES, turns.TURN_DONE, done, session=done.session_id, timeout_s=5.0)
            reason = done.result.termination_reason.value
            log.info("turn %s done (%s), acknowledged", done.turn_id, reason)
            return
        except GeodeError as exc:
            if isinstance(exc, BadRequest) and done.events:  # over the frame cap with the answer
                sink.send(done.events)
                done = done.model_copy(update={"events": []})
                continue
            if time.monotonic() > deadline:
                log.error("turn.done for %s not acknowledged: %s", done.turn_id, exc)
                return
            stopped.wait(delay)  # small steps: a lanes restart takes well under a second
            delay = min(delay * 2, 0.25)
