"""The control core's session requests: ``cli.handshake`` composes the connection's session,
``cli.prompt`` submits a turn to lanes, ``cli.attach`` replays a session's events, ``cli.resume`` picks up a
stored session. A prompt's submit and an attach's replay are continued by callback when the shell gives
``calls``: no runner thread waits for lanes."""

from __future__ import annotations

import logging
import os
import time
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from geode.control.connection import Connection, ConnState, Runner
from geode.control.held_sessions import HeldSessions
from geode.control.operator import OperatorDesk
from geode.control.owners import SessionOwners
from geode.control.replay import LANES_REPLAY_S, SessionReplay
from geode.control.tracing import prompt_span
from geode.home import GeodeHome
from geode.lanes.continued_store import Calls
from geode.protocol import control as c
from geode.protocol import lanes as lanes_msg
from geode.protocol.errors import BadRequest, GeodeError, NotFound, RequestTimeout, Unavailable
from geode.protocol.later import Later
from geode.protocol.transport import Transport
from geode.telemetry import spans
from geode.tools.catalogue_plans import CataloguePlans

if TYPE_CHECKING:
    from geode.sessions.factory import SessionSpec

log = logging.getLogger("geode.control.core")
SUBMIT_TIMEOUT_S = 3.0


class SessionRequests:
    """The handlers of the session requests; the state is set up by ``ControlCore.__init__``."""

    transport: Transport
    home: GeodeHome
    server_version: str
    origin: str
    lanes: str
    plans: CataloguePlans | None
    session_factory: Callable[..., SessionSpec]
    operator: OperatorDesk
    owners: SessionOwners
    replay: SessionReplay
    held: HeldSessions
    calls: Calls | None  # requests continued by callback (the shell's ContinuedCalls); None: blocking only
    runner: Runner
    replays: set[Later]  # continued attaches waiting for lanes' replay

    if TYPE_CHECKING:  # defined by ControlCore

        def _deliver(self, conn: Connection, events: list[lanes_msg.StreamEvent]) -> None: ...

    def _handshake(self, conn: Connection, h: c.Handshake) -> c.Welcome:
        if h.protocol_version != c.CONTROL_PROTOCOL:
            raise BadRequest(
                f"unsupported protocol {h.protocol_version!r}; this daemon speaks {c.CONTROL_PROTOCOL}"
            )
        if h.creator is not None:
            if h.mode != "HEADLESS":
                raise BadRequest("a creator is for HEADLESS (MCP) connections only")
            if h.session_id is not None:  # a re-handshake on its own session (after a control restart)
                self.owners.check(h.session_id, h.creator, absent_ok=True)
        spec = self.session_factory(
            h.mode,
            home=self.home,
            session_id=h.session_id or conn.session_id,
            workspace=h.cwd or self._default_workspace(),
            model_override=h.model,
            time_budget_override=h.time_budget_s,
            origin=self.origin,
            skip_permissions=h.dangerously_skip_permissions,
            plan=self.plans.base() if self.plans is not None else None,  # built-ins if the executor is down
        )
        if self.plans is not None and not self.plans.from_executor:  # composed without the executor's answer:
            spec = spec.model_copy(update={"plan_hash": "", "plan_generation": 0})  # claim no plan hash
        if h.creator is not None:
            spec = spec.model_copy(update={"creator": h.creator})
        with conn.lock:
            conn.spec, conn.is_tty = spec, h.is_tty
            conn.skip_permissions = spec.skip_permissions  # per connection, never process-wide
            conn.features = tuple(f for f in c.FEATURES if f in h.features)
            conn.state = ConnState.READY
            if h.session_id is None:  # a named session is attached by cli.attach or its next prompt, so a
                conn.attach(spec.session_id, 0)  # re-attach never sees live events ahead of its replay
        return c.Welcome(
            protocol_version=c.CONTROL_PROTOCOL,
            features=list(conn.features),
            server_version=self.server_version,
            connection_id=conn.conn_id,
            session_id=spec.session_id,
            model=spec.model,
            provider=spec.provider,
            workspace=spec.workspace,
        )

    def _default_workspace(self) -> str:
        """A handshake without ``cwd`` works in ``$GEODE_HOME/workspace`` (0700), never the daemon's cwd."""
        ws = self.home.root / "workspace"
        ws.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(ws, 0o700)
        return str(ws)

    def _prompt(self, conn: Connection, p: c.Prompt) -> c.PromptAccepted:
        sid, sub = self._prompt_submit(conn, p)
        # the session's live events are held until the reply is in: it carries the turn's first events
        # (queued, started: ``Submit.reply_events``), which a live event must not overtake
        carried: list[lanes_msg.StreamEvent] = []
        self.held.hold(sid)
        try:
            with prompt_span(sub.mode, self.origin, sub.turn_id, p.text):  # the turn's trace starts here
                out = lanes_msg.Submitted.model_validate(self._submit(sub, sid))
            carried = out.events or []
        finally:  # the reply's events and the live ones held meanwhile: in seq order, to every attached
            self.held.release(sid, carried)
        return c.PromptAccepted(turn_id=out.turn_id, session_id=sid, position=out.position)

    def _prompt_later(self, conn: Connection, p: c.Prompt) -> c.PromptAccepted | Later:
        """``_prompt`` with its ``lanes.submit`` continued by callback (``calls``): sent on this thread, its
        reply taken on the bus thread, no thread waiting for it (issue 34). Traced: as ``_prompt`` (its span
        is around a blocking submit). A timeout or ``unavailable`` is retried as ``_submit`` retries, on a
        ``runner`` thread (lanes restarting: the rare path)."""
        if self.calls is None or spans.enabled():
            return self._prompt(conn, p)
        sid, sub = self._prompt_submit(conn, p)
        later = Later()

        def ended(out: Any, retried: bool = False) -> None:
            if not retried and isinstance(out, RequestTimeout | Unavailable):  # lanes restarting: retried
                self.runner(lambda: ended(self._submit_rest(sub, sid), retried=True))  # off this thread
                return
            carried: list[lanes_msg.StreamEvent] = []
            try:
                if isinstance(out, BaseException):
                    raise out
                got = lanes_msg.Submitted.model_validate(out)
                carried = got.events or []
                answer: Any = c.PromptAccepted(turn_id=got.turn_id, session_id=sid, position=got.position)
            except Exception as exc:
                answer = exc
            try:
                self.held.release(sid, carried)  # as _prompt's finally: the events go before the reply
            finally:
                later.fail(answer) if isinstance(answer, BaseException) else later.resolve(answer)

        self.held.hold(sid)
        try:
            self.calls.call(self.lanes, lanes_msg.SUBMIT, sub, ended, session=sid, timeout_s=SUBMIT_TIMEOUT_S)
        except GeodeError as exc:  # the bus is not running
            ended(exc)
        return later

    def _prompt_submit(self, conn: Connection, p: c.Prompt) -> tuple[str, lanes_msg.Submit]:
        """The prompt's session and its ``lanes.submit`` (checked: an MCP connection's own session only)."""
        assert conn.spec is not None
        sid = p.session_id or conn.spec.session_id
        if conn.spec.creator and sid != conn.spec.session_id:  # an MCP connection: its own session only
            raise NotFound(SessionOwners.refusal(sid))
        turn_id = p.turn_id or f"t-{uuid.uuid4().hex[:16]}"  # the client's id: a re-sent prompt is one turn
        log.info("prompt: turn %s of session %s", turn_id, sid)
        # the spec's plan_hash / plan_generation travel with the settings to lanes and the loop worker
        settings = conn.turn_settings(sid)
        if sid in conn.resumed:  # the first turn after a resume: the loop runs SessionStart (source resume)
            conn.resumed.discard(sid)
            settings["session_source"] = "resume"
        conn.prompted.add(sid)
        conn.attach(sid, conn.attached.get(sid, 0))
        return sid, lanes_msg.Submit(
            turn_id=turn_id,
            session_id=sid,
            mode=conn.spec.mode.value,
            origin=self.origin,
            input={"text": p.text},
            # the chat's /compact: a turn that only compacts the session (geode.loop.compact_now)
            settings={**settings, "compact_now": True} if p.compact else settings,
            reply_events=True,
        )

    def _submit(
        self, sub: lanes_msg.Submit, sid: str, attempts: int = 4, delay: float = 0.2
    ) -> dict[str, Any]:
        """``lanes.submit`` is idempotent by turn id, so a timeout (lanes restarting) is retried."""
        for attempt in range(attempts):
            try:
                return self.transport.call(
                    self.lanes, lanes_msg.SUBMIT, sub, session=sid, timeout_s=SUBMIT_TIMEOUT_S
                )
            except (RequestTimeout, Unavailable):
                if attempt == attempts - 1:
                    raise
                time.sleep(delay)
                delay *= 2
        raise AssertionError("unreachable")

    def _submit_rest(self, sub: lanes_msg.Submit, sid: str) -> Any:
        """A continued submit's attempts after the first (as ``_submit``'s): the reply, or the error."""
        time.sleep(0.2)
        try:
            return self._submit(sub, sid, attempts=3, delay=0.4)
        except GeodeError as exc:
            return exc

    def _attach(self, conn: Connection, session_id: str, after_seq: int) -> c.Attached:
        self._attach_start(conn, session_id, after_seq)
        try:
            rep = self.replay.from_lanes(session_id, after_seq)
        except GeodeError as exc:
            return self._attach_from_store(conn, session_id, exc)
        return self._attach_end(conn, session_id, rep)

    def _attach_later(self, conn: Connection, a: c.Attach) -> c.Attached | Later:
        """``_attach`` with lanes' replay continued by callback (``calls``): sent on this thread, its reply
        taken on the bus thread, no ``runner`` thread parked on it, so a burst of slow attaches (a slow or
        restarting lanes) cannot take control's pool from prompts (issue 34). lanes not answering in time:
        the store's outcomes are read on a ``runner`` thread, as ``_attach`` reads them (the rare path)."""
        if self.calls is None:
            return self._attach(conn, a.session_id, a.after_seq)
        sid = a.session_id
        self._attach_start(conn, sid, a.after_seq)
        later = Later()
        self.replays.add(later)  # the control tick sweeps continued calls often while one is in flight

        def replied(out: Any) -> None:
            try:
                if isinstance(out, GeodeError):  # lanes did not answer in time, or refused
                    self.runner(lambda: self._attach_done(later, self._attach_from_store, conn, sid, out))
                    return
                rep = lanes_msg.Replayed.model_validate(out)
            except BaseException as exc:
                self._attach_done(later, self._attach_failed, conn, sid, exc)
                return
            self._attach_done(later, self._attach_end, conn, sid, rep)

        body = lanes_msg.Replay(session_id=sid, after_seq=a.after_seq)
        try:
            self.calls.call(self.lanes, lanes_msg.REPLAY, body, replied, timeout_s=LANES_REPLAY_S)
        except GeodeError as exc:  # the bus is not running
            replied(exc)
        return later

    def _attach_done(self, later: Later, step: Callable[..., c.Attached], *args: Any) -> None:
        self.replays.discard(later)
        try:
            later.resolve(step(*args))
        except BaseException as exc:
            later.fail(exc)

    def _attach_start(self, conn: Connection, session_id: str, after_seq: int) -> None:
        if conn.spec is not None and conn.spec.creator and session_id != conn.spec.session_id:
            raise NotFound(SessionOwners.refusal(session_id))
        conn.attach(session_id, after_seq, replaying=True)

    def _attach_from_store(self, conn: Connection, session_id: str, exc: GeodeError) -> c.Attached:
        with conn.lock:
            self._deliver(conn, conn.finish_replay(session_id, []))
        return self.replay.from_store(session_id, exc)

    def _attach_failed(self, conn: Connection, session_id: str, exc: BaseException) -> c.Attached:
        """A replay reply that does not validate: the live events held meanwhile go out, the attach fails."""
        with conn.lock:
            self._deliver(conn, conn.finish_replay(session_id, []))
        raise exc

    def _attach_end(self, conn: Connection, session_id: str, rep: lanes_msg.Replayed) -> c.Attached:
        with conn.lock:  # taken and sent under one lock: a live event never overtakes the replay
            self._deliver(conn, conn.finish_replay(session_id, rep.events))
        return c.Attached(
            session_id=session_id,
            replayed=len(rep.events),
            complete=rep.complete,
            outcomes=rep.outcomes,
            running=rep.running,
        )

    def _resume(self, conn: Connection, r: c.Resume) -> c.Resumed:
        assert conn.spec is not None
        if conn.spec.creator:  # MCP's continue_agent: only a session this creator started
            summary = self.owners.check(r.session_id, conn.spec.creator)
        else:
            summary = self.operator.find_session(r.session_id, newest=r.continue_)
        conn.spec = conn.spec.model_copy(update={"session_id": summary["session_id"]})
        conn.attach(summary["session_id"], 0)
        conn.resumed.add(summary["session_id"])
        return c.Resumed(
            session_id=summary["session_id"],
            message_count=int(summary.get("message_count", 0)),
            status=str(summary.get("status", "active")),
        )
