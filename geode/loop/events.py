"""Turn events with a per-session sequence number, sent to the configured sink (never fatal to the turn)."""

from __future__ import annotations

import logging
import threading
from typing import Any

from geode.loop.ports import EventSink
from geode.protocol.turns import TurnEvent, TurnEventKind

log = logging.getLogger(__name__)

# A resumed turn continues numbering this far past the last checkpointed seq, so events re-sent by a new
# incarnation never reuse numbers an older incarnation already emitted after its last save.
RESUME_SEQ_GAP = 1_000_000


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
