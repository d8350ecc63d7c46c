"""The thin CLI's control-socket client: a DEALER on ``cli.sock``, handshake, requests, streamed turns.

One thread uses the socket at a time (a lock guards it): the main thread reads replies and events, a
heartbeat thread sends ``cli.ping`` casts while the user is answering a prompt. When the daemon's control
child restarts, the client notices (its socket reports the disconnection at once; else a ping answered
``ok: false`` or silence), handshakes again with the same session and re-attaches from the last sequence
number it saw, so the rest of the turn still arrives. When lanes restarts, control pushes ``cli.notice``
and the client replays from its last seq at once (the old lanes may have taken events with it).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Collection
from typing import Any

import zmq

from actors.cli import daemon_link
from actors.cli.drop_watch import DropWatch
from actors.cli.turn_replies import cancel_pending, durable_outcomes, unknown_to
from geode.home import GeodeHome
from geode.protocol import catalog, codec
from geode.protocol import control as c
from geode.protocol import lanes as lanes_msg
from geode.protocol.envelope import Envelope
from geode.protocol.errors import BadRequest, GeodeError, RequestTimeout, Unavailable
from geode.protocol.transport import unwrap

PING_EVERY_S = 0.5  # a restarted control answers the first ping after its restart with ok: false
SILENCE_S = 2.0  # no answer to pings for this long: assume the control child restarted
CATCHUP_S = 0.5  # no stream event for this long while a turn runs: replay from the last seq (a cheap probe)
MAX_PINGS_IN_FLIGHT = 64
UNACKED_CANCEL_WAIT_S = 10.0  # Ctrl-C before the prompt was acknowledged: follow the cancelled turn this long

EventFn = Callable[[dict[str, Any]], None]
ApprovalFn = Callable[[dict[str, Any]], str]  # "y" / "a" / "n" / "n: why", or NO_ONE; Ctrl-C cancels the turn
NO_ONE = "no_one"  # an approval callback's answer when it has nobody to ask (sent as reason "no_terminal")


class ControlClient:
    def __init__(self, home: GeodeHome, *, client_version: str = "", ctx: zmq.Context | None = None) -> None:  # type: ignore[type-arg]
        self.home = home
        self.client_version = client_version
        self._ctx = ctx or zmq.Context.instance()
        self._lock = threading.RLock()
        self._sock: zmq.Socket | None = None  # type: ignore[type-arg]
        self.handshake_body: dict[str, Any] = {}
        self.welcome: dict[str, Any] = {}
        self.session_id: str | None = None
        self.last_seq: dict[str, int] = {}
        self.reattached = 0
        self.notices = 0  # cli.notice pushes received (a lanes restart: catch up)
        self.on_recovery: Callable[[str], None] | None = None  # "reattached" / "caught_up" (for the harness)
        self._watch: DropWatch | None = None
        self._poller = zmq.Poller()
        self.inbox: list[dict[str, Any]] = []  # events that arrived while waiting for some reply
        self._hb_stop = threading.Event()
        self._hb: threading.Thread | None = None

    # --- connection --------------------------------------------------------------------------------------
    def open(self) -> None:
        s = self._ctx.socket(zmq.DEALER)
        s.setsockopt(zmq.LINGER, 0)
        s.setsockopt(zmq.ROUTING_ID, os.urandom(8))
        s.setsockopt(zmq.RECONNECT_IVL, 100)
        s.setsockopt(zmq.MAXMSGSIZE, 2 * codec.MAX_FRAME_BYTES)
        try:
            self._watch = DropWatch(s, owner=self)
        except zmq.ZMQError:
            s.close(0)  # never left for the garbage collector
            raise
        self._poller = zmq.Poller()
        self._poller.register(s, zmq.POLLIN)
        self._poller.register(self._watch.mon, zmq.POLLIN)
        s.connect(f"ipc://{self.home.cli_socket}")
        self._sock = s

    @property
    def disconnects(self) -> int:
        """How often the socket's peer (the control child) went away since :meth:`open`."""
        return self._watch.drops if self._watch is not None else 0

    def _close_socket(self) -> None:
        if self._watch is not None:
            self._watch.close()
            self._watch = None
        if self._sock is not None:
            self._sock.close(0)
            self._sock = None

    def connect(self, *, timeout_s: float = 5.0, **handshake: Any) -> dict[str, Any]:
        """Open the socket and handshake (session_id, model, cwd, is_tty, skip-permissions)."""
        if self._sock is None:
            self.open()
        body = {
            "protocol_version": c.CONTROL_PROTOCOL,
            "features": list(c.FEATURES),
            "client_version": self.client_version,
            "cwd": os.getcwd(),
            **handshake,
        }
        self.handshake_body = {k: v for k, v in body.items() if v is not None}
        self.welcome = self.request(c.HANDSHAKE, self.handshake_body, timeout_s=timeout_s)
        self.session_id = self.welcome["session_id"]
        self._start_heartbeat()
        return self.welcome

    def drop(self) -> None:
        """Close the socket without ``cli.exit`` (a handshake that got no answer: the next one starts over
        on a new socket, with a new routing id)."""
        with self._lock:
            self._close_socket()

    def close(self) -> None:
        self._hb_stop.set()
        if self._sock is not None:
            try:
                self.request(c.EXIT, {}, timeout_s=1.0)
            except GeodeError:
                pass
            with self._lock:
                self._close_socket()

    def _start_heartbeat(self) -> None:
        if self._hb is not None:
            return

        def beat() -> None:
            while not self._hb_stop.wait(PING_EVERY_S):
                try:
                    self._send(Envelope(kind="cast", type=c.PING, body={}))
                except (GeodeError, zmq.ZMQError):
                    if self._sock is None:
                        return

        self._hb = threading.Thread(target=beat, name="cli-heartbeat", daemon=True)
        self._hb.start()

    # --- frames --------------------------------------------------------------------------------------------
    def _send(self, env: Envelope) -> None:
        with self._lock:
            if self._sock is None:
                raise Unavailable("not connected")
            self._sock.send(codec.encode(env), zmq.NOBLOCK)

    def _recv(self, timeout_s: float) -> Envelope | None:
        """The next frame within ``timeout_s``; None at the timeout, or at once when the peer went away."""
        with self._lock:
            if self._sock is None:
                raise Unavailable("not connected")
            ready = dict(self._poller.poll(int(max(0.0, timeout_s) * 1000)))
            if self._watch is not None and self._watch.mon in ready:
                self._watch.drain()
            if self._sock not in ready:
                return None
            frame = self._sock.recv()
        try:
            return codec.decode(frame)
        except BadRequest:
            return None

    def send_request(self, type_: str, body: dict[str, Any]) -> str:
        env = Envelope(type=type_, body=catalog.dump(body), session=self.session_id)
        self._send(env)
        return env.id

    def request(
        self,
        type_: str,
        body: dict[str, Any] | None = None,
        *,
        timeout_s: float = 10.0,
        on_event: EventFn | None = None,
    ) -> dict[str, Any]:
        """One request and its reply; new events meanwhile go to ``on_event`` (else to the inbox). When the
        control child goes away while the request is in flight, :class:`Unavailable` at once: its reply may
        never come (the caller handshakes again and retries, instead of waiting out ``timeout_s``)."""
        drops = self.drain_drops()  # a drop seen from now on may have taken this request with it
        mid = self.send_request(type_, body or {})
        deadline = time.monotonic() + timeout_s
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise RequestTimeout(f"no reply to {type_} within {timeout_s:g}s")
            env = self.wait_reply((mid,), left, on_event=on_event)
            if env is not None:
                return unwrap(env)
            if self.disconnects != drops:
                raise Unavailable(f"the control child went away with {type_} in flight")

    def drain_drops(self) -> int:
        """Read the socket monitor's pending events now; returns :attr:`disconnects`."""
        with self._lock:
            if self._watch is not None:
                self._watch.drain()
        return self.disconnects

    def wait_reply(
        self, mids: Collection[str], timeout_s: float, *, on_event: EventFn | None = None
    ) -> Envelope | None:
        """The first reply (ok or error) to any request in ``mids``; None after ``timeout_s``, or as soon as
        the control child went away (:attr:`disconnects` grew). Events meanwhile go to ``on_event``."""
        drops = self.disconnects
        deadline = time.monotonic() + timeout_s
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or self.disconnects != drops:
                return None
            env = self._recv(min(left, 0.2))
            if env is None:
                continue
            if env.kind in ("ok", "error") and env.corr in mids:
                return env
            if env.type == c.CLI_EVENT and self._note(env.body):
                (on_event or self.inbox.append)(env.body)
            elif env.type == c.CLI_NOTICE:
                self.notices += 1

    def _note(self, ev: dict[str, Any]) -> bool:
        sid, seq = ev.get("session_id", ""), int(ev.get("seq", 0))
        if seq <= self.last_seq.get(sid, 0):
            return False
        self.last_seq[sid] = seq
        return True

    # --- turns ---------------------------------------------------------------------------------------------
    def run_prompt(
        self,
        text: str,
        *,
        on_event: EventFn | None = None,
        on_approval: ApprovalFn | None = None,
        timeout_s: float = 3600.0,
        on_interrupt: Callable[[], bool] | None = None,
        cancel_wait_s: float | None = None,
    ) -> dict[str, Any]:
        """Send a prompt and stream its events until ``turn_done``; returns the result (+ ``turn_id``).

        The client chooses the turn id, so a prompt whose reply was lost is re-sent as the same turn
        (``reattach.submit_prompt``). Giving up (no acknowledgement, or ``timeout_s`` passed while the turn
        runs) raises ``reattach.TurnContinues`` with the turn's id."""
        from actors.cli.reattach import TurnContinues, new_turn_id, submit_prompt

        backlog: list[dict[str, Any]] = []
        mine = new_turn_id()
        body = {"text": text, "session_id": self.session_id, "turn_id": mine}
        try:
            accepted = submit_prompt(self, body, backlog)
        except KeyboardInterrupt:  # Ctrl-C before the prompt's reply came: the turn may run already
            if on_interrupt is None or not on_interrupt():
                raise
            return self._cancel_unacknowledged(mine, backlog, on_event, on_approval, cancel_wait_s)
        turn_id = accepted["turn_id"]
        try:
            return self.follow(
                turn_id,
                backlog=backlog,
                on_event=on_event,
                on_approval=on_approval,
                timeout_s=timeout_s,
                on_interrupt=on_interrupt,
                cancel_wait_s=cancel_wait_s,
            )
        except RequestTimeout as exc:
            sid = str(accepted.get("session_id") or self.session_id or "")
            raise TurnContinues(turn_id, sid, exc.message, accepted=True) from exc

    def _cancel_unacknowledged(
        self,
        turn_id: str,
        backlog: list[dict[str, Any]],
        on_event: EventFn | None,
        on_approval: ApprovalFn | None,
        cancel_wait_s: float | None,
    ) -> dict[str, Any]:
        """Cancel our turn by its id, then follow it to its end for a while: a turn that ran reports what
        the cancel stopped (not applied), one that never started gives ``cancel_pending``."""
        try:
            self.cancel(turn_id)
        except GeodeError:
            pass
        wait = UNACKED_CANCEL_WAIT_S if cancel_wait_s is None else cancel_wait_s
        try:
            return self.follow(
                turn_id, backlog=backlog, on_event=on_event, on_approval=on_approval, timeout_s=wait
            )
        except RequestTimeout:
            return cancel_pending(turn_id)

    def follow(
        self,
        turn_id: str,
        *,
        backlog: list[dict[str, Any]] | None = None,
        on_event: EventFn | None = None,
        on_approval: ApprovalFn | None = None,
        timeout_s: float = 3600.0,
        on_interrupt: Callable[[], bool] | None = None,
        cancel_wait_s: float | None = None,
    ) -> dict[str, Any]:
        """Stream the turn's events until its ``turn_done``. Ctrl-C (when ``on_interrupt()`` says so) sends
        ``cli.cancel``; then the turn is followed to its end, or, with ``cancel_wait_s``, at most that long
        (a second Ctrl-C: not at all) before returning ``user_cancelled`` with ``cancel_pending``."""
        deadline = time.monotonic() + timeout_s
        give_up_at: float | None = None  # after a Ctrl-C: stop waiting for the cancelled turn's end here
        last_heard = last_event = time.monotonic()
        next_ping = last_reattach = 0.0
        drops, notices = self.disconnects, self.notices
        pings: dict[str, float] = {}  # our pings in flight → when sent (replies may come late, in a burst)
        pending = list(backlog or [])

        def interrupted() -> bool:
            """Ctrl-C: cancel the turn and keep following it (for a while) to its end; True: stop now."""
            nonlocal give_up_at
            if on_interrupt is None or not on_interrupt():
                raise KeyboardInterrupt
            if give_up_at is not None:  # the second Ctrl-C: stop waiting now
                return True
            try:
                self.cancel(turn_id)  # lanes denies the turn's pending approvals ("cancelled") and stops it
            except GeodeError:
                pass
            if cancel_wait_s is not None:
                give_up_at = time.monotonic() + cancel_wait_s
            return False

        while time.monotonic() < deadline:
            pending, self.inbox = [*pending, *self.inbox], []
            while pending:
                ev = pending.pop(0)
                try:
                    out = self._on_turn_event(ev, turn_id, on_event, on_approval)
                except KeyboardInterrupt:  # Ctrl-C at the approval prompt: the turn is cancelled, not denied
                    if interrupted():
                        return cancel_pending(turn_id)
                    continue
                if out is not None:
                    return out
            if give_up_at is not None and time.monotonic() >= give_up_at:
                return cancel_pending(turn_id)
            try:
                wait = 0.2 if give_up_at is None else min(0.05, max(0.0, give_up_at - time.monotonic()))
                env = self._recv(wait)
            except KeyboardInterrupt:
                if interrupted():
                    return cancel_pending(turn_id)
                continue
            now = time.monotonic()
            if env is not None:
                last_heard = now
                if env.type == c.CLI_EVENT:
                    last_event = now
                    if self._note(env.body):
                        pending.append(env.body)
                elif env.type == c.CLI_NOTICE:
                    self.notices += 1
                elif env.corr in pings and pings.pop(env.corr) >= last_reattach and unknown_to(env):
                    # a control that does not know this connection (it restarted): any of our pings sent
                    # since the last re-attach says so, not only the latest (a slow control answers late)
                    last_reattach = now
                    try:
                        pending.extend(self.reattach(timeout_s=2.0))
                    except GeodeError:
                        pass  # the next ping tries again
            if self.disconnects != drops:  # control went away: handshake again now (sent as it comes back)
                drops = self.disconnects
                last_reattach = last_heard = last_event = now
                try:
                    pending.extend(self.reattach(timeout_s=2.0))
                except GeodeError:
                    pass  # not back within 2 s: pings and silence take over
                continue
            if self.notices != notices:  # lanes restarted: what died with it is replayed now
                notices = self.notices
                last_event = now
                try:
                    pending.extend(self.catch_up(timeout_s=2.0))
                except GeodeError:
                    pass
                continue
            if env is not None:
                continue
            if now - last_event > CATCHUP_S:  # a quiet stream: ask for anything we may have missed
                last_event = now  # not backed off: under repeated kills a probe that found nothing yet
                try:  # is followed by the one that finds the turn's end (a 600 s chaos run said so)
                    pending.extend(self.catch_up(timeout_s=2.0))
                except GeodeError:
                    pass
            if now - last_heard > SILENCE_S:
                last_heard = now
                try:
                    pending.extend(self.reattach(timeout_s=2.0))
                except GeodeError:
                    continue  # still down; keep trying until the deadline
            if now >= next_ping:
                next_ping = now + PING_EVERY_S
                pings[self.send_request(c.PING, {})] = now
                while len(pings) > MAX_PINGS_IN_FLIGHT:
                    pings.pop(next(iter(pings)))
        raise RequestTimeout(f"turn {turn_id} did not finish within {timeout_s:g}s")

    def _on_turn_event(
        self, ev: dict[str, Any], turn_id: str, on_event: EventFn | None, on_approval: ApprovalFn | None
    ) -> dict[str, Any] | None:
        if on_event is not None:
            on_event(ev)
        if ev.get("kind") == lanes_msg.APPROVAL_REQUEST:
            data = ev.get("data") or {}
            answer = on_approval(data) if on_approval is not None else NO_ONE
            decision, _, note = answer.partition(":")  # "n: <reason>" carries the reason to the model
            reply = {"approval_id": data.get("approval_id", ""), "decision": decision.strip() or "n"}
            if answer == NO_ONE:  # nobody was asked: said as such, never as a person's "n"
                reply = {**reply, "decision": "n", "reason": "no_terminal"}
            else:
                reply["note"] = note.strip()[:1024]
            try:
                self.request(c.APPROVAL_RESPONSE, reply, timeout_s=5.0)
            except GeodeError:
                pass  # an unknown or stale approval: the daemon already decided
        if ev.get("kind") == lanes_msg.TURN_DONE and ev.get("turn_id") == turn_id:
            return {**(ev.get("data") or {}).get("result", {}), "turn_id": turn_id}
        return None

    def reattach(self, *, timeout_s: float = 5.0) -> list[dict[str, Any]]:
        """Handshake again on the same session and replay what we missed (the rest of the turn)."""
        body = {**self.handshake_body, "session_id": self.session_id}
        got: list[dict[str, Any]] = []
        self.request(c.HANDSHAKE, body, timeout_s=timeout_s)
        sid = self.session_id or ""
        reply = self.request(
            c.ATTACH,
            {"session_id": sid, "after_seq": self.last_seq.get(sid, 0)},
            timeout_s=timeout_s,
            on_event=got.append,
        )
        self.reattached += 1
        if self.on_recovery is not None:
            self.on_recovery("reattached")
        return got + durable_outcomes(reply, sid)

    def catch_up(self, *, timeout_s: float = 5.0) -> list[dict[str, Any]]:
        """Replay events after the last seq we saw (lost in a lanes restart, say); duplicates are dropped."""
        sid = self.session_id or ""
        got: list[dict[str, Any]] = []
        reply = self.request(
            c.ATTACH,
            {"session_id": sid, "after_seq": self.last_seq.get(sid, 0)},
            timeout_s=timeout_s,
            on_event=got.append,
        )
        if self.on_recovery is not None:
            self.on_recovery("caught_up")
        # a restarted lanes lost the buffer: a turn that ended meanwhile is known only by its durable outcome
        return got + durable_outcomes(reply, sid)

    def cancel(self, turn_id: str | None = None) -> dict[str, Any]:
        return self.request(c.CLI_CANCEL, {"turn_id": turn_id}, timeout_s=5.0)


# their old home (``from actors.cli.client import client_version, connect_daemon``)
client_version = daemon_link.client_version
connect_daemon = daemon_link.connect_daemon
serving = daemon_link.serving
