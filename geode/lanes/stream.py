"""Per-session event streams: lane-assigned sequence numbers, a bounded replay buffer for re-attach, and an
origin's ``origin.events`` route (:func:`each_event`)."""

from __future__ import annotations

import logging
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from typing import Any

from geode.protocol.lanes import StreamEvent, StreamEvents, stream_event
from geode.protocol.transport import Request

log = logging.getLogger(__name__)

MAX_SESSIONS = 256
MAX_EVENTS_PER_SESSION = 512
MAX_SEQ_SESSIONS = 16384  # sessions whose last seq is remembered after their events were dropped
MAX_TRACKED_TURNS = 4096
SEEN_PER_TURN = 256  # a turn's seqs remembered as seen (a repeat of an older one is no longer caught)


class StreamBuffer:
    """Assigns ``seq`` per session and keeps the last events of recently active sessions (bounded LRU).

    ``seq`` starts at ``start_ms * 10**6`` so it keeps increasing across restarts of lanes: a client that
    re-attaches with its last seq never mistakes a new event for an old one. A session's seq also keeps
    increasing after the LRU dropped it: a session it has no seq for starts above every seq given out so far
    (a chat left open while 256 other sessions ran must not see its next turn's events numbered below what
    it already saw: it would drop them as repeats).
    """

    def __init__(
        self,
        *,
        max_sessions: int = MAX_SESSIONS,
        max_events: int = MAX_EVENTS_PER_SESSION,
        max_seq_sessions: int = MAX_SEQ_SESSIONS,
        start_ms: int | None = None,
    ) -> None:
        self._base = (start_ms if start_ms is not None else int(time.time() * 1000)) * 10**6
        self._high = self._base  # the highest seq given out (to any session)
        self._max_sessions = max_sessions
        self._max_events = max_events
        self._max_seq_sessions = max(max_seq_sessions, max_sessions)
        self._seq: OrderedDict[str, int] = OrderedDict()
        self._events: OrderedDict[str, deque[StreamEvent]] = OrderedDict()

    def append(self, session_id: str, turn_id: str, kind: str, data: dict[str, Any]) -> StreamEvent:
        seq = self._seq.get(session_id, self._high) + 1
        self._seq[session_id] = seq
        self._seq.move_to_end(session_id)
        if seq > self._high:
            self._high = seq
        if len(self._seq) > self._max_seq_sessions:
            self._seq.popitem(last=False)  # (older than every session with events: LRU in step with them)
        ev = stream_event(session_id, turn_id, seq, kind, data)
        buf = self._events.get(session_id)
        if buf is None:
            buf = self._events[session_id] = deque(maxlen=self._max_events)
        self._events.move_to_end(session_id)
        buf.append(ev)
        while len(self._events) > self._max_sessions:
            self._events.popitem(last=False)  # its seq stays known (``_seq``): numbering goes on from it
        return ev

    def since(self, session_id: str, after_seq: int) -> tuple[list[StreamEvent], bool]:
        """Buffered events with ``seq > after_seq`` and whether the buffer reaches back that far."""
        buf = list(self._events.get(session_id, ()))
        out = [e for e in buf if e.seq > after_seq]
        if not buf:
            # its events were dropped (the LRU) or it has none in this incarnation: complete only when the
            # client saw the last seq given to it; a client that saw nothing (``after_seq`` 0), an earlier
            # lanes incarnation's events (that one may have streamed this session's turns, even their end)
            # or a session forgotten altogether cannot be vouched for: lanes adds the durable outcomes
            last = self._seq.get(session_id)
            return out, last is not None and after_seq >= last
        return out, buf[0].seq <= after_seq + 1

    def sessions(self) -> int:
        return len(self._events)


class Reorder:
    """Puts a worker's events for one turn back in its ``seq`` order (handlers may run them out of order).

    Events in order are released at once; a gap is held at most ``hold_s`` (then released as is); a seq
    seen before is a duplicate and dropped.
    """

    def __init__(self, hold_s: float = 0.25, max_held: int = 64) -> None:
        self.hold_s = hold_s
        self.max_held = max_held
        self._next: dict[str, int] = {}
        self._held: dict[str, dict[int, tuple[float, Any]]] = {}
        # per turn, the last SEEN_PER_TURN seqs seen, oldest first (a dict as an ordered set: O(1) lookups)
        self._seen: dict[str, dict[int, None]] = {}

    def push(self, turn_id: str, seq: int, item: Any, now: float | None = None) -> list[Any]:
        now = time.monotonic() if now is None else now
        if turn_id not in self._seen and len(self._seen) >= MAX_TRACKED_TURNS:  # late events of old turns
            oldest = next(iter(self._seen))
            self._seen.pop(oldest)
            self._next.pop(oldest, None)
            self._held.pop(oldest, None)
        seen = self._seen.setdefault(turn_id, {})
        if seq in seen:
            return []
        seen[seq] = None
        if len(seen) > SEEN_PER_TURN:
            del seen[next(iter(seen))]
        nxt = self._next.get(turn_id)
        if nxt is None or seq <= nxt:  # the first event of a turn, or a late one: release now
            self._next[turn_id] = max(nxt or 0, seq + 1)
            return [item, *self._drain(turn_id)]
        held = self._held.setdefault(turn_id, {})
        held[seq] = (now, item)
        return self._drain(turn_id, now)

    def _drain(self, turn_id: str, now: float | None = None) -> list[Any]:
        out: list[Any] = []
        held = self._held.get(turn_id) or {}
        while held:
            nxt = self._next[turn_id]
            if nxt in held:
                out.append(held.pop(nxt)[1])
                self._next[turn_id] = nxt + 1
                continue
            oldest = min(t for t, _ in held.values())
            if now is not None and (now - oldest >= self.hold_s or len(held) > self.max_held):
                self._next[turn_id] = min(held)  # give up on the gap
                continue
            break
        return out

    def flush(self, now: float | None = None) -> list[Any]:
        """Release gaps older than ``hold_s`` (called from the periodic tick)."""
        now = time.monotonic() if now is None else now
        return [x for t in list(self._held) for x in self._drain(t, now)]

    def forget(self, turn_id: str) -> list[Any]:
        held = self._held.pop(turn_id, {})
        self._next.pop(turn_id, None)
        self._seen.pop(turn_id, None)
        return [held[s][1] for s in sorted(held)]


def each_event(
    handler: Callable[[StreamEvent, Request], None],
) -> Callable[[StreamEvents, Request], None]:
    """The ``origin.events`` route of an origin whose ``origin.event`` route is ``handler``: each event of
    the frame in order, as if it had come alone (one that fails is logged; the rest still go through)."""

    def on_events(body: StreamEvents, r: Request) -> None:
        for ev in body.events:
            try:
                handler(ev, r)
            except Exception:
                log.exception("stream event %s (seq %d) failed", ev.kind, ev.seq)

    return on_events
