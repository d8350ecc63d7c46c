"""The thin CLI's connection to control: a DEALER on ``cli.sock``, handshake, requests and replies, pings.

One thread uses the socket at a time (a lock guards it): the main thread reads replies and events, a
heartbeat thread sends ``cli.ping`` casts while the user is answering a prompt. When the daemon's control
child restarts, the socket reports the disconnection at once; :meth:`ControlSocket.reattach` handshakes again
with the same session and replays from the last sequence number seen, :meth:`ControlSocket.catch_up` replays
without a handshake (after a lanes restart). Streaming a turn over it is ``actors/cli/client.py``.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Collection
from typing import TYPE_CHECKING, Any

import zmq

from actors.cli import wire
from actors.cli import wire_data as c
from actors.cli.drop_watch import DropWatch
from actors.cli.turn_replies import durable_outcomes
from actors.cli.wire import Frame, unwrap
from geode.protocol.errors import BadRequest, GeodeError, RequestTimeout, Unavailable

if TYPE_CHECKING:  # `geode ask` passes HomePaths (strings: no pathlib before its first message)
    from geode.home import GeodeHome
    from geode.home_paths import HomePaths

PING_EVERY_S = 0.5  # a restarted control answers the first ping after its restart with ok: false
ATTACH_PATIENCE_S = 6.0  # a catch-up's attach unanswered this long is given up: the next one is sent anew

EventFn = Callable[[dict[str, Any]], None]


class _Attach:
    """A catch-up's ``cli.attach`` in flight: its id, session, when it was sent (monotonic), the socket's
    drop count then, and its reply once one came while nobody waited for it. (A plain class: ``geode ask``
    imports no ``dataclasses``.)"""

    __slots__ = ("at", "drops", "mid", "reply", "sid")

    def __init__(self, mid: str, sid: str, at: float, drops: int) -> None:
        self.mid, self.sid, self.at, self.drops = mid, sid, at, drops
        self.reply: Frame | None = None


class ControlSocket:
    def __init__(
        self,
        home: GeodeHome | HomePaths,
        *,
        client_version: str = "",
        ctx: zmq.Context | None = None,  # type: ignore[type-arg]
    ) -> None:
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
        self._split: list[Frame] = []  # the rest of a ``cli.events`` frame, one event each (wire.split)
        self._hb_stop = threading.Event()
        self._hb: threading.Thread | None = None
        self._attach: _Attach | None = None  # a catch-up's attach whose reply is still due (one at a time)

    # --- connection --------------------------------------------------------------------------------------
    def open(self) -> None:
        s = self._ctx.socket(zmq.DEALER)
        s.setsockopt(zmq.LINGER, 0)
        s.setsockopt(zmq.ROUTING_ID, os.urandom(8))
        s.setsockopt(zmq.RECONNECT_IVL, 100)
        s.setsockopt(zmq.MAXMSGSIZE, 2 * c.MAX_FRAME_BYTES)
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
        hb = self._hb
        if hb is not None and hb is not threading.current_thread():
            hb.join(1.0)  # a ping it is sending goes before cli.exit (after it, control opens a new slot)
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
                    self._send(wire.encode(c.PING, kind="cast")[1])
                except (GeodeError, zmq.ZMQError):
                    if self._sock is None:
                        return

        self._hb = threading.Thread(target=beat, name="cli-heartbeat", daemon=True)
        self._hb.start()

    # --- frames --------------------------------------------------------------------------------------------
    def _send(self, frame: bytes) -> None:
        with self._lock:
            if self._sock is None:
                raise Unavailable("not connected")
            self._sock.send(frame, zmq.NOBLOCK)

    def _recv(self, timeout_s: float) -> Frame | None:
        """The next frame within ``timeout_s``; None at the timeout, or at once when the peer went away."""
        with self._lock:
            if self._split:
                return self._split.pop(0)
            if self._sock is None:
                raise Unavailable("not connected")
            ready = dict(self._poller.poll(int(max(0.0, timeout_s) * 1000)))
            if self._watch is not None and self._watch.mon in ready:
                self._watch.drain()
            if self._sock not in ready:
                return None
            frame = self._sock.recv()
            try:
                first, *self._split = wire.split(wire.decode(frame))  # under the lock: events stay in order
            except BadRequest:
                return None
            return first

    def send_request(self, type_: str, body: dict[str, Any]) -> str:
        mid, frame = wire.encode(type_, body, session=self.session_id)
        self._send(frame)
        wire.prepare()  # the first time: the validators are built while the daemon answers
        return mid

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
        return unwrap(self._reply_to(mid, type_, timeout_s, drops, on_event))

    def _reply_to(
        self, mid: str, type_: str, timeout_s: float, drops: int, on_event: EventFn | None
    ) -> Frame:
        """The reply to request ``mid`` (sent when :attr:`disconnects` was ``drops``); ``RequestTimeout``
        after ``timeout_s``, ``Unavailable`` as soon as the control child went away."""
        deadline = time.monotonic() + timeout_s
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise RequestTimeout(f"no reply to {type_} within {timeout_s:g}s")
            env = self.wait_reply((mid,), left, on_event=on_event)
            if env is not None:
                return env
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
    ) -> Frame | None:
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
            if self.late_attach(env):
                continue
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

    def reattach(self, *, timeout_s: float = 5.0) -> list[dict[str, Any]]:
        """Handshake again on the same session and replay what we missed (the rest of the turn)."""
        body = {**self.handshake_body, "session_id": self.session_id}
        got: list[dict[str, Any]] = []
        self.request(c.HANDSHAKE, body, timeout_s=timeout_s)
        sid = self.session_id or ""
        reply = self._attach_after_seen(sid, got, timeout_s, fresh=True)  # a new handshake: a new attach
        self.reattached += 1
        if self.on_recovery is not None:
            self.on_recovery("reattached")
        return got + durable_outcomes(reply, sid)

    def catch_up(self, *, timeout_s: float = 5.0) -> list[dict[str, Any]]:
        """Replay events after the last seq we saw (lost in a lanes restart, say); duplicates are dropped."""
        sid = self.session_id or ""
        got: list[dict[str, Any]] = []
        reply = self._attach_after_seen(sid, got, timeout_s)
        if self.on_recovery is not None:
            self.on_recovery("caught_up")
        # a restarted lanes lost the buffer: a turn that ended meanwhile is known only by its durable outcome
        return got + durable_outcomes(reply, sid)

    def _attach_after_seen(
        self, sid: str, got: list[dict[str, Any]], timeout_s: float, *, fresh: bool = False
    ) -> dict[str, Any]:
        """``cli.attach`` from the last seq seen; the events that arrive meanwhile (replayed or live) go to
        ``got``. When the attach fails (no reply in time: a slow control), they go to the inbox instead of
        being dropped with ``got``: each was already counted as seen (``last_seq``), so no later replay
        would bring it again (a live ``turn_done`` taken during a timed-out catch-up was lost for good, and
        the client waited out its deadline although the turn had ended: issue 34, 100 sessions under load).

        One catch-up in flight per client: an attach that got no reply in time stays in flight (control
        still runs it, queued on this connection), and the next catch-up waits for ITS reply (or takes the
        one that came meanwhile: :meth:`late_attach`) instead of sending another behind it, so a slow
        control is not sent a storm of them. A new one is sent after a handshake (``fresh``), when the
        control child went away since, for another session, or once it is ``ATTACH_PATIENCE_S`` old."""
        try:
            return self._one_attach(sid, got.append, timeout_s, fresh)
        except BaseException:  # a timeout, a refusal, Ctrl-C: what was taken is not dropped
            self.inbox.extend(got)
            got.clear()
            raise

    def _one_attach(self, sid: str, on_event: EventFn, timeout_s: float, fresh: bool) -> dict[str, Any]:
        now, drops = time.monotonic(), self.drain_drops()
        held = self._attach
        if (
            fresh
            or held is None
            or held.sid != sid
            or held.drops != drops
            or now - held.at > ATTACH_PATIENCE_S
        ):
            body = {"session_id": sid, "after_seq": self.last_seq.get(sid, 0)}
            held = self._attach = _Attach(self.send_request(c.ATTACH, body), sid, now, drops)
        elif held.reply is not None:  # its reply came while nobody waited for it
            self._attach = None
            return unwrap(held.reply)
        try:
            env = self._reply_to(held.mid, c.ATTACH, timeout_s, drops, on_event)
        except Unavailable:  # gone with the control child: its reply never comes
            self._attach = None
            raise  # (no reply in time, or Ctrl-C: still in flight, the next catch-up waits for it)
        self._attach = None
        return unwrap(env)

    def late_attach(self, env: Frame) -> bool:
        """Whether ``env`` is the reply to a catch-up's attach that nobody waits for now (it timed out); kept
        for the next catch-up, which takes it instead of asking again (``follow`` asks at once)."""
        held = self._attach
        if held is None or env.corr != held.mid or env.kind not in ("ok", "error"):
            return False
        held.reply = env
        return True

    def cancel(self, turn_id: str | None = None) -> dict[str, Any]:
        return self.request(c.CLI_CANCEL, {"turn_id": turn_id}, timeout_s=5.0)
