"""ControlCore: the control socket's request handling, independent of ZeroMQ.

The shell hands it every decoded frame with the connection id; it answers through ``send``. Approval replies,
cancels and pings are handled at once (never behind a running request); other requests run in order per
connection on ``runner`` threads, bounded (``overloaded`` when full). Streams come in from lanes as
``origin.event`` and go out to every connection attached to that session. A connection that has not
handshaken within ``handshake_deadline_s`` is dropped (its traffic does not keep it); when the table is
full, such silent connections are evicted first, oldest first. An approval is answered only by a
connection it was delivered to; the skip-permissions flag belongs to the turn (the executor reads it).
The session requests (handshake, prompt, attach, resume) are ``geode/control/session_requests.py``, the
streams out ``geode/control/event_routing.py``.
"""

from __future__ import annotations

import itertools
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ValidationError

from geode.control.chat_requests import ChatRequests
from geode.control.connection import PENDING, Connection, ConnState, Runner
from geode.control.event_routing import EventRouting
from geode.control.held_sessions import HeldSessions
from geode.control.lanes_watch import tell_lanes_restarted
from geode.control.operator import OperatorDesk
from geode.control.owners import SessionOwners
from geode.control.replay import SessionReplay
from geode.control.session_requests import SessionRequests
from geode.control.settings import HANDSHAKE_DEADLINE_S, IDLE_TIMEOUT_S, QUEUE_MAX
from geode.control.slots import MAX_CONNECTIONS, SlotTable
from geode.home import GeodeHome
from geode.lanes.continued_store import Calls
from geode.protocol import catalog, codec
from geode.protocol import control as c
from geode.protocol import lanes as lanes_msg
from geode.protocol.dispatch import Dispatch
from geode.protocol.envelope import Envelope
from geode.protocol.errors import (
    BadRequest,
    ErrorCode,
    GeodeError,
    NotFound,
    NotReady,
    Overloaded,
)
from geode.protocol.later import Later
from geode.protocol.transport import Request, Transport
from geode.protocol.typed_frames import Received, decode_request
from geode.redaction import redact_text
from geode.sessions.factory import SessionSpec, create_session
from geode.telemetry import spans
from geode.tools.catalogue_plans import CataloguePlans

log = logging.getLogger(__name__)
Send = Callable[[str, Envelope], None]
IMMEDIATE = {c.APPROVAL_RESPONSE, c.PING, c.CLI_CANCEL, c.EXIT}
BEFORE_HANDSHAKE = {c.HANDSHAKE, c.PING, c.EXIT}


def _inline(job: Callable[[], object]) -> None:
    job()


@dataclass(frozen=True)
class CliRequest(Request):
    """A control request as its handler sees it: the validated body, the envelope, and its connection."""

    conn: Connection


def conn_of(request: Request) -> Connection:
    """The connection a control request came on (every request the core dispatches is a CliRequest)."""
    assert isinstance(request, CliRequest), request
    return request.conn


class ControlCore(SessionRequests, ChatRequests, EventRouting):
    """Frames in, the connection table; the session requests are :class:`SessionRequests`, streams out
    :class:`EventRouting`."""

    def __init__(
        self,
        transport: Transport,
        send: Send,
        *,
        home: GeodeHome | None = None,
        runner: Runner = _inline,
        server_version: str = "0",
        origin: str = "control",
        lanes: str = "lanes",
        queue_max: int = QUEUE_MAX,
        idle_timeout_s: float = IDLE_TIMEOUT_S,
        handshake_deadline_s: float = HANDSHAKE_DEADLINE_S,
        max_connections: int = MAX_CONNECTIONS,
        session_factory: Callable[..., SessionSpec] = create_session,
        clock: Callable[[], float] = time.monotonic,
        plans: CataloguePlans | None = None,
        on_session_end: Callable[[str, str, str], None] | None = None,
        calls: Calls | None = None,
    ) -> None:
        self.plans = plans  # the executor's catalogue, asked each time a session is composed (None: no tools)
        self.on_session_end = on_session_end  # (session id, Claude Code reason, cwd): SessionEnd hooks
        self.transport, self.send, self.runner = transport, send, runner
        self.calls = calls  # a prompt's lanes.submit continued by callback (None: a runner thread waits)
        self.home = home or GeodeHome.from_env()
        self.server_version, self.origin, self.lanes = server_version, origin, lanes
        self.queue_max, self.idle_timeout_s = queue_max, idle_timeout_s
        self.handshake_deadline_s, self.max_connections = handshake_deadline_s, max_connections
        self.session_factory, self.clock = session_factory, clock
        self.operator = OperatorDesk(transport, lanes=lanes)
        self.owners = SessionOwners(self.operator)
        self.replay = SessionReplay(transport, lanes)
        # continued attaches waiting for lanes (the shell's tick: replaying())
        self.replays: set[Later] = set()
        self.slots = SlotTable()
        self.held = HeldSessions(self._route)  # a session's live events while a submit for it is in flight
        self.bad_frames = 0
        # ids of the events sent to clients: a random prefix and a counter (no clock and RNG per event)
        self._ids = map(f"{os.urandom(5).hex()}{{:014x}}".format, itertools.count(1))
        self.dispatch = Dispatch(
            "control",
            {
                c.PING: self._ping,
                c.EXIT: lambda b, r: lanes_msg.Ok(),
                c.HANDSHAKE: lambda b, r: self._handshake(conn_of(r), b),
                c.CLI_CANCEL: self._cancel,
                c.APPROVAL_RESPONSE: self._approval_response,
                c.RESUME: lambda b, r: self._resume(conn_of(r), b),
                c.MODEL: lambda b, r: self._set_model(conn_of(r), b),
                **self.operator.routes(),
            },
            deferred={
                c.PROMPT: lambda b, r: self._prompt_later(conn_of(r), b),
                c.ATTACH: lambda b, r: self._attach_later(conn_of(r), b),
            },
        )

    # --- frames in ---------------------------------------------------------------------------------------
    def on_frame(self, conn_id: str, frame: bytes) -> None:
        """One raw frame from a client. Never raises: every failure is a typed error reply or a drop. A
        request's envelope and body are validated in one pass (``decode_request``); a refused body is
        answered where ``on_envelope`` takes the body, after the connection's own checks, as before."""
        try:
            env, received = decode_request(frame)
        except BadRequest as exc:
            self.bad_frames += 1
            mid, _ = codec.peek_reply_address(frame)
            self._error_raw(conn_id, mid, exc)
            return
        self.on_envelope(conn_id, env, received)

    def on_envelope(self, conn_id: str, env: Envelope, received: Received = None) -> None:
        try:
            if self.slots.is_expired(conn_id, readmit=env.kind == "request" and env.type == c.HANDSHAKE):
                raise NotReady("no handshake in time: this connection was dropped; handshake or reconnect")
            if env.kind == "cast" and env.type == c.PING and conn_id not in self.slots.conns:
                return  # a heartbeat of a routing id we do not know (sent after its exit): opens no slot
            conn = self._conn(conn_id)
            if conn.state is ConnState.READY:  # pre-handshake traffic never extends a connection's slot
                conn.last_seen = self.clock()
            if env.kind == "cast" and env.type == c.PING:
                return  # a heartbeat: being seen is all it does
            if env.kind != "request" or not env.type.startswith("cli."):
                raise BadRequest(f"{env.kind} {env.type!r} is not a control request")
            if conn.state is ConnState.NEW and env.type not in BEFORE_HANDSHAKE:
                raise NotReady("send cli.handshake first")
            if isinstance(received, BadRequest):
                raise received
            body = received if received is not None else catalog.parse_body(env.type, env.body)
            if env.type == c.HANDSHAKE:
                conn.handshake_sent = True
        except GeodeError as exc:
            self.bad_frames += exc.code == ErrorCode.BAD_REQUEST
            self._reply_error(conn_id, env, exc)
            return
        job = lambda: self._run(conn, env, body)  # noqa: E731
        if env.type in IMMEDIATE:
            (job if env.type in (c.APPROVAL_RESPONSE, c.PING) else lambda: self.runner(job))()
            return
        # a prompt or attach that is only sent (its reply continued: _prompt_later, _attach_later) runs here,
        # no pool thread woken
        here = self.calls is not None and (
            env.type == c.ATTACH or (env.type == c.PROMPT and not spans.enabled())
        )
        try:
            conn.enqueue(job, self.runner, limit=self.queue_max, here=here)
        except Overloaded as exc:
            self._reply_error(conn_id, env, exc)

    def _run(self, conn: Connection, env: Envelope, body: BaseModel) -> object:
        """Run a request and answer it; ``PENDING``: its answer comes later (the connection waits for it)."""
        out: Any
        try:
            out = self.dispatch.handle_later(CliRequest(env, body, conn))
        except Exception as exc:
            out = exc
        if isinstance(out, Later):
            out.then(lambda ok, value: self._reply(conn, env, value, resume=True))
            return PENDING
        self._reply(conn, env, out)
        return None

    def _reply(self, conn: Connection, env: Envelope, out: Any, resume: bool = False) -> None:
        """Send a request's reply (``out``: its result, or the exception it ended with); ``resume``: a
        ``PENDING`` job's, the connection's next job runs after it."""
        try:
            if isinstance(out, BaseException):
                raise out
            self.send(conn.conn_id, env.reply_ok(catalog.dump(out), sender=self.origin))
        except GeodeError as exc:
            self._reply_error(conn.conn_id, env, exc)
        except ValidationError as exc:
            self._reply_error(conn.conn_id, env, BadRequest(f"invalid reply: {exc.errors()[0].get('msg')}"))
        except Exception as exc:  # a bug: typed, redacted, and the child lives on
            log.exception("control request %s failed", env.type)
            self._reply_error(conn.conn_id, env, GeodeError(f"{type(exc).__name__}: {exc}"))
        if env.type == c.HANDSHAKE and conn.state is ConnState.NEW:
            conn.handshake_sent = False  # a failed handshake earns no shelter from eviction or the deadline
        if env.type == c.EXIT:
            self.disconnect(conn.conn_id, reason="exit")
        if resume:
            conn.resume(self.runner)

    def replaying(self) -> bool:
        """Whether a continued attach waits for lanes' replay (its 1 s deadline wants a finer sweep)."""
        return bool(self.replays)

    def _ping(self, b: c.Empty, r: Request) -> lanes_msg.Ok:
        return lanes_msg.Ok(ok=conn_of(r).state is ConnState.READY)  # False: this daemon does not know us

    def _cancel(self, b: c.CliCancel, r: Request) -> dict[str, Any]:
        cancel = lanes_msg.Cancel(turn_id=b.turn_id, session_id=conn_of(r).session_id)
        return self.transport.call(self.lanes, lanes_msg.CANCEL, cancel)

    def _approval_response(self, b: c.ApprovalResponse, r: Request) -> lanes_msg.Ok:
        conn = conn_of(r)
        with conn.lock:  # only a connection the request was delivered to may answer it
            if conn.pending_approvals.pop(b.approval_id, None) is None:
                raise NotFound(f"approval {b.approval_id!r} is not pending on this connection")
        self._forget_approval(b.approval_id)
        self.transport.cast(self.lanes, lanes_msg.APPROVAL_REPLY, lanes_msg.ApprovalReply(**b.model_dump()))
        return lanes_msg.Ok()

    # --- lanes ---------------------------------------------------------------------------------------------
    def lanes_restarted(self, incarnation: int) -> int:
        """A new lanes incarnation is ready: its clients catch up at once and once more a hello later
        (blocks the calling thread for about a second)."""
        return tell_lanes_restarted(
            self.transport,
            self.send,
            self._snapshot,
            lanes=self.lanes,
            origin=self.origin,
            incarnation=incarnation,
        )

    # --- connections ----------------------------------------------------------------------------------------
    @property
    def _conns(self) -> dict[str, Connection]:
        return self.slots.conns

    @property
    def dropped_unready(self) -> int:
        return self.slots.dropped_unready

    def _conn(self, conn_id: str) -> Connection:
        return self.slots.get(conn_id, self.clock(), limit=self.max_connections, idle_s=self.idle_timeout_s)

    def _snapshot(self) -> list[Connection]:
        return self.slots.snapshot()

    def disconnect(self, conn_id: str, *, reason: str = "disconnect") -> int:
        """Forget a connection; deny its pending approvals. Returns how many approvals were denied."""
        conn = self.slots.pop(conn_id)
        if conn is None:
            return 0
        with conn.lock:
            conn.state = ConnState.CLOSED
            pending = list(conn.pending_approvals)
            conn.pending_approvals.clear()
        still_seen = {a for k in self._snapshot() for a in k.pending_approvals}
        denied = [a for a in pending if a not in still_seen]
        for aid in denied:
            self._answer(aid, "n")
        log.info("connection %s closed (%s); denied %d approvals", conn_id, reason, len(denied))
        if self.on_session_end is not None:  # the person's client left the sessions it ran turns in
            why = "prompt_input_exit" if reason == "exit" else "other"
            for sid in sorted(conn.prompted):
                self.on_session_end(sid, why, conn.spec.workspace if conn.spec else "")
        return len(denied)

    def tick(self) -> list[str]:
        """Drop connections with no handshake past the deadline, close those silent past the idle timeout
        (a lost client). Returns their ids."""
        now = self.clock()
        late = self.slots.expire_late(now, deadline_s=self.handshake_deadline_s, idle_s=self.idle_timeout_s)
        if late:
            log.info("dropped %d control connections with no handshake in time", len(late))
        gone = [
            k.conn_id
            for k in self._snapshot()
            if k.state is ConnState.READY and now - k.last_seen > self.idle_timeout_s
        ]
        for cid in gone:
            self.disconnect(cid, reason="heartbeat lost")
        return late + gone

    def connections(self) -> list[dict[str, Any]]:
        return [
            {
                "id": k.conn_id,
                "state": k.state.value,
                "session": k.session_id,
                "waiting": k.waiting(),
                "pending_approvals": len(k.pending_approvals),
            }
            for k in self._snapshot()
        ]

    # --- errors ---------------------------------------------------------------------------------------------
    def _reply_error(self, conn_id: str, env: Envelope, exc: GeodeError) -> None:
        if env.kind != "request":
            return
        self.send(
            conn_id, env.reply_error(exc.code.value, redact_text(exc.message, 2048), sender=self.origin)
        )

    def _error_raw(self, conn_id: str, mid: str | None, exc: GeodeError) -> None:
        body = {"code": exc.code.value, "message": redact_text(exc.message, 2048)}
        self.send(
            conn_id, Envelope(kind="error", type="cli.error", corr=mid, body=body, **{"from": self.origin})
        )
