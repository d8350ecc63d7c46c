"""A worker's ``turn.events`` (several events of one turn in one frame) relayed as one frame per origin.

Each event is fenced, reordered and numbered exactly as a lone ``turn.event`` is
(:meth:`geode.lanes.state.LanesState.relay_event`): an older incarnation's events are dropped, a gap is held,
a repeat is dropped, and lanes' per-session ``seq`` and replay buffer see one event at a time. What the batch
releases goes to the turn's origin as one ``origin.events`` frame (one ``origin.event`` when it is one event).
Thread-safe like the single relay: the bus thread calls it as the frame arrives, under ``stream_lock``.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from geode.protocol import lanes as lanes_msg
from geode.protocol import turns
from geode.protocol.errors import GeodeError

if TYPE_CHECKING:
    from geode.lanes.state import LanesState

log = logging.getLogger(__name__)


def relay_events(state: LanesState, events: list[turns.TurnEvent], sender: str) -> None:
    """``turn.events`` (or a lone ``turn.event``, as one) from ``sender`` into the sessions' streams."""
    mine = []
    for ev in events:
        owner = state.pool.owner_key(ev.turn_id)
        if owner is not None and sender and sender != owner and "#" in sender:
            continue  # an older incarnation of a worker that no longer owns this turn
        mine.append(ev)
    with state.stream_lock:
        released = [item for ev in mine for item in state.reorder.push(ev.turn_id, ev.seq, ev)]
        if len(released) <= 1:
            for ev in released:
                state._relay(ev)  # the single path, as before
            return
        sends: dict[tuple[str, str], list[lanes_msg.StreamEvent]] = {}
        for ev in released:
            rec = state._recs.get(ev.turn_id)
            out = state.stream.append(ev.session_id, ev.turn_id, ev.kind.value, ev.data)
            if rec is not None and rec.origin:
                sends.setdefault((rec.origin, ev.session_id), []).append(out)
        for (origin, session_id), outs in sends.items():  # cast under the lock: the origin gets seq order
            _send(state, origin, session_id, outs)


def _send(state: LanesState, origin: str, session_id: str, outs: list[lanes_msg.StreamEvent]) -> None:
    for i in range(0, len(outs), lanes_msg.STREAM_EVENTS_MAX):
        chunk = outs[i : i + lanes_msg.STREAM_EVENTS_MAX]
        try:
            if len(chunk) == 1:
                state.transport.cast(origin, lanes_msg.ORIGIN_EVENT, chunk[0], session=session_id)
            else:
                body = lanes_msg.StreamEvents(events=chunk)
                state.transport.cast(origin, lanes_msg.ORIGIN_EVENTS, body, session=session_id)
        except GeodeError as exc:  # the origin may be restarting; it re-attaches from the buffer
            log.debug("origin %s unreachable: %s", origin, exc)
