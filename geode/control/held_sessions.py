"""Control's hold on a session's live events while a ``lanes.submit`` for it is in flight.

Lanes answers the submit of a turn that starts at once with the turn's first stream events (``turn_queued``,
``turn_started``: ``Submit.reply_events``) instead of sending them as an ``origin.events`` frame (issue 34
session 6: a frame fewer per turn in lanes and in control). Those events reach control on a request's thread,
the session's later events on the bus thread: so while a submit is in flight its session's live events are
held here, and when the reply is in, the carried and the held events go out together in ``seq`` order, to
every connection attached to the session (as an ``origin.events`` frame would have). A leaf lock apart from
the delivery it wraps: ``deliver`` takes connection locks, never this one.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from geode.protocol.lanes import StreamEvent

Deliver = Callable[[list[StreamEvent]], None]


class HeldSessions:
    """Sessions with a submit in flight → the live events that arrived meanwhile."""

    def __init__(self, deliver: Deliver) -> None:
        self._deliver = deliver
        self._held: dict[str, tuple[int, list[StreamEvent]]] = {}  # session -> (submits in flight, events)
        self._mu = threading.Lock()

    def hold(self, session_id: str) -> None:
        with self._mu:
            n, evs = self._held.get(session_id, (0, []))
            self._held[session_id] = (n + 1, evs)

    def release(self, session_id: str, carried: list[StreamEvent]) -> None:
        """A submit for the session is answered (``carried``: its reply's events) or failed (none): when it
        was the last in flight, what is held and carried is delivered, in seq order, without repeats."""
        with self._mu:
            n, evs = self._held.pop(session_id, (1, []))
            evs = [*evs, *carried]
            if n > 1:
                self._held[session_id] = (n - 1, evs)
                return
            if evs:
                self._deliver(sorted({e.seq: e for e in evs}.values(), key=lambda e: e.seq))

    def take(self, events: list[StreamEvent]) -> None:
        """Live events of one frame (one session's, from lanes): held while their session's submit is in
        flight, else delivered now (under the lock: a release never interleaves with them)."""
        with self._mu:
            if self._held:
                now = []
                for ev in events:
                    held = self._held.get(ev.session_id)
                    if held is not None:
                        held[1].append(ev)
                    else:
                        now.append(ev)
                events = now
            if events:
                self._deliver(events)
