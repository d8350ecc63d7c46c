"""The control core's streams out: a session's events from lanes (``origin.event`` / ``origin.events``) to
every connection attached to it, in seq order per connection, batched for a client that takes ``cli.events``;
an approval nobody attached can answer is answered ``n`` (``no_origin``) here. A mixin of
:class:`geode.control.core.ControlCore` (split from core.py at its size limit)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from typing import Any

from geode.control.connection import Connection, ConnState
from geode.control.held_sessions import HeldSessions
from geode.control.slots import SlotTable
from geode.protocol import control as c
from geode.protocol import lanes as lanes_msg
from geode.protocol.envelope import Envelope, outgoing
from geode.protocol.errors import GeodeError
from geode.protocol.transport import Transport

log = logging.getLogger("geode.control.core")
BATCHES = "event_batches"  # the handshake feature of a client that takes ``cli.events``
UNBATCHED = frozenset({lanes_msg.APPROVAL_REQUEST})  # up to 512 KiB each: one to a frame, as before
MAX_PENDING_PER_CONN = 64


class EventRouting:
    """Events to attached connections; the state is set up by ``ControlCore.__init__``."""

    transport: Transport
    send: Callable[[str, Envelope], None]
    origin: str
    lanes: str
    slots: SlotTable
    held: HeldSessions
    _ids: Iterator[str]

    def on_origin_event(self, ev: lanes_msg.StreamEvent) -> None:
        """A session event from lanes goes to every attached connection; an unseen approval → ``n``. Held
        while a submit for its session is in flight (:class:`HeldSessions`)."""
        self.held.take([ev])

    def on_origin_events(self, evs: list[lanes_msg.StreamEvent]) -> None:
        """Several events of one ``origin.events`` frame, each taken as :meth:`on_origin_event` takes it."""
        self.held.take(evs)

    def _route(self, evs: list[lanes_msg.StreamEvent]) -> None:
        """Events to every connection attached to their session, each taken (seq-deduped) and sent under the
        connection's lock, so its sends stay in seq order; a connection gets those it accepts in one
        ``cli.events`` frame when it said ``event_batches``."""
        per: dict[str, tuple[Connection, list[lanes_msg.StreamEvent]]] = {}
        for ev in evs:
            for k in self._targets(ev):
                per.setdefault(k.conn_id, (k, []))[1].append(ev)
        for k, mine in per.values():
            with k.lock:
                self._deliver(k, [x for ev in mine for x in k.accept(ev)])

    def _targets(self, ev: lanes_msg.StreamEvent) -> list[Connection]:
        """The connections attached to the event's session, once its bookkeeping is done (approvals asked,
        a turn's end); none for an approval nobody attached can answer (answered ``n`` here)."""
        targets = self.slots.attached_to(ev.session_id)  # an index read, not a scan of every connection
        if ev.kind == lanes_msg.APPROVAL_REQUEST:
            aid = str(ev.data.get("approval_id", ""))
            asker = [k for k in targets if k.state is ConnState.READY]
            if not asker:  # nobody attached to ask: said as such, never as a person's "n"
                self._answer(aid, "n", reason="no_origin")
                return []
            for k in asker:  # no auto-answer here: skipping permissions is the turn's, decided upstream
                with k.lock:
                    k.pending_approvals[aid] = ev.session_id
                    while len(k.pending_approvals) > MAX_PENDING_PER_CONN:  # lanes already timed those out
                        k.pending_approvals.pop(next(iter(k.pending_approvals)))
        return targets

    def _deliver(self, conn: Connection, events: list[lanes_msg.StreamEvent]) -> None:
        """The events were validated as they arrived: each is sent as read off its model (``event_wire``),
        without a second pass through pydantic."""
        wire = lanes_msg.event_wire
        if len(events) > 1 and BATCHES in conn.features and not any(e.kind in UNBATCHED for e in events):
            for i in range(0, len(events), lanes_msg.STREAM_EVENTS_MAX):  # several events, one frame
                chunk = events[i : i + lanes_msg.STREAM_EVENTS_MAX]
                self._send_event(
                    conn, c.CLI_EVENTS, {"events": [wire(ev) for ev in chunk]}, chunk[0].session_id
                )
            return
        for ev in events:
            self._send_event(conn, c.CLI_EVENT, wire(ev), ev.session_id)

    def _send_event(self, conn: Connection, type_: str, body: dict[str, Any], session_id: str) -> None:
        env = outgoing(
            id=next(self._ids), kind="cast", type=type_, body=body, sender=self.origin, session=session_id
        )
        self.send(conn.conn_id, env)

    def _answer(self, approval_id: str, decision: str, reason: str = "user") -> None:
        try:
            self.transport.cast(
                self.lanes,
                lanes_msg.APPROVAL_REPLY,
                lanes_msg.ApprovalReply(approval_id=approval_id, decision=decision, reason=reason),
            )  # type: ignore[arg-type]
        except GeodeError as exc:
            log.warning("cannot answer approval %s: %s", approval_id, exc)

    def _forget_approval(self, approval_id: str) -> None:
        """An answered approval is no longer pending anywhere (a second answer is refused)."""
        for k in self.slots.snapshot():
            with k.lock:
                k.pending_approvals.pop(approval_id, None)
