"""A worker's ``turn.events`` (several events of one turn in one frame) relayed as one frame per origin, and
every send of stream events to an origin (:func:`send_events`).

Each event is fenced, reordered and numbered exactly as a lone ``turn.event`` is: an older incarnation's
events are dropped, a gap is held, a repeat is dropped, and lanes' per-session ``seq`` and replay buffer see
one event at a time. What the batch releases goes to the turn's origin as one ``origin.events`` frame (one
``origin.event`` when it is one event).

The turn's last batch (the one holding its ``termination``) is numbered and buffered at once but held for the
origin until lanes' own ``turn_done`` for that session follows (its done record stored): both then go as one
frame (issue 34 session 4: a frame fewer per turn on each hop to the client, who waits for the done anyway).
Any other send to that session's origin takes what is held first, so the origin still gets every event in
``seq`` order; the tick sends a hold older than :data:`HOLD_END_S` (a worker lost between its termination and
its ``turn.done``). Lanes killed while holding loses those events from the stream, as it loses its replay
buffer: a re-attaching client gets the turn's durable outcome.
Thread-safe like the single relay: the bus thread calls it as the frame arrives, under ``stream_lock``.
"""

from __future__ import annotations

import logging
from typing import Any, Protocol

from geode.lanes.pool import WorkerPool
from geode.lanes.stream import Reorder, StreamBuffer
from geode.protocol import lanes as lanes_msg
from geode.protocol import turns
from geode.protocol.errors import BadRequest, GeodeError

log = logging.getLogger(__name__)
Held = tuple[str, list[lanes_msg.StreamEvent], float]  # origin, its events, since (the state's clock)


class LanesState(Protocol):
    """What the relay uses of :class:`geode.lanes.state.LanesState` (which imports this module)."""

    pool: WorkerPool
    reorder: Reorder
    stream: StreamBuffer
    stream_lock: Any
    transport: Any
    held_ends: dict[str, Held]
    _recs: dict[str, Any]
    _clock: Any


END_KIND = turns.TurnEventKind.TERMINATION.value  # the event a turn's last batch ends with
HOLD_END_S = 0.5  # the longest the turn's last batch waits for its done (sent by the tick after that)


def relay_events(state: LanesState, events: list[turns.TurnEvent], sender: str) -> None:
    """``turn.events`` (or a lone ``turn.event``, as one) from ``sender`` into the sessions' streams."""
    mine = events
    if sender and "#" in sender:  # a worker's incarnation: fenced by its turns' owners (one lookup a turn)
        owners: dict[str, str | None] = {}
        mine = []
        for ev in events:
            if ev.turn_id not in owners:
                owners[ev.turn_id] = state.pool.owner_key(ev.turn_id)
            owner = owners[ev.turn_id]
            if owner is not None and sender != owner:
                continue  # an older incarnation of a worker that no longer owns this turn
            mine.append(ev)
    with state.stream_lock:
        released = [item for ev in mine for item in state.reorder.push(ev.turn_id, ev.seq, ev)]
        sends: dict[tuple[str, str], list[lanes_msg.StreamEvent]] = {}
        for ev in released:
            rec = state._recs.get(ev.turn_id)
            out = state.stream.append(ev.session_id, ev.turn_id, ev.kind.value, ev.data)
            if rec is not None and rec.origin:
                sends.setdefault((rec.origin, ev.session_id), []).append(out)
        for (origin, session_id), outs in sends.items():  # cast under the lock: the origin gets seq order
            if any(o.kind == END_KIND for o in outs):
                _hold(state, origin, session_id, outs)
            else:
                send_events(state, origin, session_id, outs)


def send_events(state: LanesState, origin: str, session_id: str, outs: list[lanes_msg.StreamEvent]) -> None:
    """Send ``outs`` (numbered, in seq order) to ``origin``, after what is held for the session. Called under
    ``stream_lock``."""
    held = state.held_ends.pop(session_id, None)
    if held is not None:
        if held[0] == origin:
            outs = [*held[1], *outs]
        else:
            _send(state, held[0], session_id, held[1])
    _send(state, origin, session_id, outs)


def send_stale_holds(state: LanesState, now: float, hold_s: float = HOLD_END_S) -> None:
    """The tick: send every hold older than ``hold_s`` (its done did not follow). Under ``stream_lock``."""
    for session_id, (origin, outs, since) in list(state.held_ends.items()):
        if now - since >= hold_s:
            del state.held_ends[session_id]
            _send(state, origin, session_id, outs)


def _hold(state: LanesState, origin: str, session_id: str, outs: list[lanes_msg.StreamEvent]) -> None:
    held = state.held_ends.get(session_id)
    if held is not None and held[0] == origin:  # a second end before a done: kept together, in order
        state.held_ends[session_id] = (origin, [*held[1], *outs], held[2])
        return
    if held is not None:
        send_events(state, held[0], session_id, [])
    state.held_ends[session_id] = (origin, outs, state._clock())


def _send(state: LanesState, origin: str, session_id: str, outs: list[lanes_msg.StreamEvent]) -> None:
    for i in range(0, len(outs), lanes_msg.STREAM_EVENTS_MAX):
        chunk = outs[i : i + lanes_msg.STREAM_EVENTS_MAX]
        try:
            if len(chunk) == 1:  # each event's body read off its model: no pydantic pass (issue 34)
                body = lanes_msg.event_wire(chunk[0])
                state.transport.cast(origin, lanes_msg.ORIGIN_EVENT, body, session=session_id)
            else:
                body = {"events": [lanes_msg.event_wire(ev) for ev in chunk]}
                state.transport.cast(origin, lanes_msg.ORIGIN_EVENTS, body, session=session_id)
        except BadRequest as exc:  # together over the frame cap (a done with a long answer): one to a frame
            if len(chunk) == 1:
                log.warning("stream event for %s not sent: %s", origin, exc)
                continue
            for ev in chunk:
                _send(state, origin, session_id, [ev])
        except GeodeError as exc:  # the origin may be restarting; it re-attaches from the buffer
            log.debug("origin %s unreachable: %s", origin, exc)
