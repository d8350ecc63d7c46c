"""Frames arriving on a Bus's sockets: requests run (inline or on a handler pool) and are answered, at
once or when a deferred reply completes; replies resolve pending requests; hellos name peers; events reach
subscribers."""

from __future__ import annotations

import logging
import time
from functools import partial
from typing import Any

import zmq
from pydantic import ValidationError

from actors.bus.parts import ERROR_TYPE, Client, PendingReply, Served, Sub
from actors.bus.poll_loop import PollLoop
from actors.bus.shared_socket import HOLD_MAX_PARTS
from geode.protocol import codec, runtime, typed_frames
from geode.protocol.codec import BATCH_HEADS
from geode.protocol.envelope import Envelope, error_wire, now_ms, reply_wire
from geode.protocol.errors import BadRequest, ErrorCode, GeodeError
from geode.protocol.later import Later
from geode.protocol.transport import DEFERRED_CAP_S, Service, dispatch_untraced, dispatch_wire
from geode.work_tally import HANDOFF_REPLY
from geode.work_tally import ON as TALLY_ON
from geode.work_tally import handoff as tally

log = logging.getLogger("actors.bus.socket_thread")
DEFERRED_GRACE_S = 1.0  # past the caller's deadline before its deferred reply is dropped
DEFERRED_SWEEP_S = 1.0
INLINE_MAX_BYTES = 64 * 1024  # a larger frame of an inline type still goes to a handler thread


class Inbound(PollLoop):
    """The receiving half of a Bus, run on its bus thread (handlers on their pools)."""

    def _on_router(self, served: Served) -> None:
        """Read ``served``'s ROUTER until empty (its fd is edge-triggered), each frame's work done in turn.

        One frame (the common case) ends with ``ZMQ_EVENTS`` after its work (an inline reply sent), not with
        a receive that raises ``zmq.Again``. A burst (more waits) is read in groups of what waits (up to
        ``HOLD_MAX_PARTS``, until ``zmq.Again``) before their work: a group's inline replies to one peer go
        out as one batch frame (``SharedSocket.release``; not on tcp). Each group ends with ``ZMQ_EVENTS``
        asked after its replies were sent, so the edge of the fd is re-armed before the bus sleeps."""
        wire = served.wire
        self._reading = wire  # read until empty: an inline reply sent meanwhile need not ask ZMQ_EVENTS
        sock = served.sock
        try:
            parts = wire.recv()
            if parts is None:
                return
            if len(parts) >= 2:
                self._router_frame(served, sock, parts)
            if not wire.readable():
                return
            for _ in range(512 // HOLD_MAX_PARTS):  # bounded: the other sockets get their turn
                group = wire.recv_burst(HOLD_MAX_PARTS)
                held = served.batch and len(group) > 1
                if held:
                    wire.held = []  # held until the group's work is done (SharedSocket.release)
                try:
                    for parts in group:
                        if len(parts) >= 2:
                            self._router_frame(served, sock, parts)
                finally:
                    waiting = wire.release() if held else wire.readable()
                if not waiting:
                    return
            self._hot.add(wire.fd)  # more may wait: read on after the other sockets had their turn
        finally:
            self._reading = None

    def _router_frame(self, served: Served, sock: Any, parts: list[bytes]) -> None:
        prefix, frame = parts[:-1], parts[-1]
        if frame[:1] in BATCH_HEADS:  # several envelopes in one message: each is a frame of its own
            for part in self._split(frame, prefix, sock):
                self._router_frame(served, sock, [*prefix, part])
            return
        try:
            env, body = typed_frames.decode_request(frame)  # envelope and body validated in one pass
        except BadRequest as exc:
            self._send_raw(served.sock, [*prefix, self._bad_request_frame(frame, exc)])
            return
        if env.kind in ("ok", "error"):
            self._resolve(env)
        elif env.type == runtime.HELLO:
            self._on_hello(served, prefix[0], body)
        elif env.type in served.inline and len(frame) <= INLINE_MAX_BYTES:  # cheap: no hand-off
            out = self._reply_frame(served.service, env, body)
            if type(out) is bytes:  # (most often: sent here, not through _answer)
                self._send_raw(sock, [*prefix, out])
            else:
                self._answer(env, out, sock, prefix)
        elif served.pool.full():
            if env.kind == "request":
                message = f"{served.name}: {served.pool.max_backlog} requests queued"
                err = error_wire(env, ErrorCode.OVERLOADED.value, message, self.sender)
                self._send_raw(sock, [*prefix, codec.encode_wire(err)])
        else:
            pending = served.pool.pending  # queued with this pass's others right before the bus sleeps
            if not pending:
                self._handoffs.append(served.pool.flush)
            pending.append(partial(self._handle, served.service, env, body, served.sock, prefix))

    def _resolve(self, env: Envelope) -> None:
        """A reply read by the bus thread: its waiter is woken right before the bus thread sleeps
        (``_hand_off``); a continued request's continuation (short, never blocking: actors/bus/continued.py)
        runs at once, so that reply does not wait for the rest of the pass (other sockets' frames, ops)."""
        p = self._pending.pop(env.corr, None) if env.corr else None
        if p is None:
            return
        p.reply = env
        tally(HANDOFF_REPLY)  # (a continuation hands its outcome on too: to the lanes actor, a connection)
        if not p.inline:
            self._handoffs.append(p.set)
            return
        try:
            p.set()
        except Exception:  # (as _hand_off's: a failed continuation must not end this socket's read)
            log.exception("bus %s: a continuation failed", self.sender)

    def _on_hello(self, served: Served, rid: bytes, hello: typed_frames.Received) -> None:
        if not isinstance(hello, runtime.Hello):  # its body was refused
            return
        is_new = served.peers.get(hello.name) != rid
        for k in [k for k in served.peers if k == hello.name or k.startswith(hello.name + "#")]:
            del served.peers[k]
        served.peers[hello.name] = rid
        served.peers[f"{hello.name}#{hello.incarnation}"] = rid
        for k in (hello.name, f"{hello.name}#{hello.incarnation}"):
            (served.trace_peers.add if hello.trace else served.trace_peers.discard)(k)
        if is_new and served.on_peer is not None:
            served.pool.submit(partial(served.on_peer, hello.name, hello.incarnation))

    def _on_dealer(self, client: Client) -> None:
        """Read a peer connection's DEALER until empty, as :meth:`_on_router` reads a ROUTER."""
        wire = client.wire
        self._reading = wire
        try:
            burst = False
            for _ in range(512):
                parts = wire.recv()
                if parts is None:
                    return
                self._dealer_frame(client, parts[-1])
                if not burst:
                    if not wire.readable():
                        return
                    burst = True
            self._hot.add(wire.fd)
        finally:
            self._reading = None

    def _split(self, frame: bytes, prefix: list[bytes] | None, sock: Any) -> list[bytes]:
        """The envelopes of a batch frame, each then handled as a frame of its own. A malformed batch gets one
        ``bad_request`` (none of its parts is handled), a part that is a batch itself its own: sent on
        ``sock`` to ``prefix``, or dropped with a warning where none is answered (``prefix`` None: a DEALER's
        frames, as a malformed frame there)."""
        try:
            parts = codec.split_batch(frame)
        except BadRequest as exc:
            parts, bad = [], [(frame, exc)]
        else:
            bad = [(p, BadRequest("a batch frame inside a batch")) for p in parts if p[:1] in BATCH_HEADS]
            if bad:
                parts = [p for p in parts if p[:1] not in BATCH_HEADS]
        for part, err in bad:
            if prefix is None:
                log.warning("dropped a malformed frame: %s", err)
            else:
                self._send_raw(sock, [*prefix, self._bad_request_frame(part, err)])
        return parts

    def _dealer_frame(self, client: Client, frame: bytes) -> None:
        if frame[:1] in BATCH_HEADS:
            for part in self._split(frame, None, None):
                self._dealer_frame(client, part)
            return
        try:
            env, body = typed_frames.decode_request(frame)
        except BadRequest as exc:
            log.warning("dropped a malformed frame from %s: %s", client.target, exc)
            return
        if env.kind in ("ok", "error"):
            self._resolve(env)
        else:
            self._dealer_push(client, env, body)

    def _dealer_push(self, client: Client, env: Envelope, body: typed_frames.Received) -> None:
        """A request or cast a peer pushed on our DEALER (bus thread)."""
        if client.service is None or client.pool is None:
            if env.kind == "request":
                err = error_wire(
                    env, ErrorCode.NOT_FOUND.value, f"{self.sender} handles no pushes", self.sender
                )
                self._send_raw(client.sock, [codec.encode_wire(err)])
        elif env.type in getattr(client.service, "inline_types", ()):  # a peer's push, any size: one path
            self._answer(env, self._reply_frame(client.service, env, body), client.sock, [])  # keeps order
        else:
            job = partial(self._handle, client.service, env, body, client.sock, [])
            self._handoffs.append(partial(client.pool.submit, job))

    def _lead_frame(self, client: Client, frame: bytes, waiter: PendingReply) -> None:
        """A frame the waiter reading a request-only DEALER read (its thread, actors/bus/reply_reader.py): a
        reply resolves its request at once; anything else goes to the bus thread."""
        if frame[:1] in BATCH_HEADS:
            for part in self._split(frame, None, None):
                self._lead_frame(client, part, waiter)
            return
        try:
            env, body = typed_frames.decode_request(frame)
        except BadRequest as exc:
            log.warning("dropped a malformed frame from %s: %s", client.target, exc)
            return
        if env.kind not in ("ok", "error"):
            self._post(partial(self._dealer_push, client, env, body))
            return
        p = self._pending.pop(env.corr, None) if env.corr else None
        if p is not None:
            p.reply = env
            if TALLY_ON and p is not waiter:
                tally(HANDOFF_REPLY)  # another waiter's reply: its thread is woken
            try:  # (p.set() without its call: every reply a waiter reads)
                p._done.release()
            except RuntimeError:  # already set
                pass

    def _on_sub(self, sub: Sub) -> None:
        for _ in range(512):
            try:
                parts = sub.sock.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                return
            try:
                env = codec.decode(parts[-1])
            except BadRequest:
                continue
            sub.pool.submit(partial(sub.on_event, env.type, env.body))

    def _bad_request_frame(self, frame: bytes, exc: GeodeError) -> bytes:
        mid, typ = codec.peek_reply_address(frame)
        body = {"code": ErrorCode.BAD_REQUEST.value, "message": exc.message[:2048]}
        try:
            env = Envelope(kind="error", type=typ or ERROR_TYPE, corr=mid, body=body, **{"from": self.sender})
        except ValidationError:
            env = Envelope(kind="error", type=ERROR_TYPE, body=body, **{"from": self.sender})
        return codec.encode(env)

    def _handle(
        self, service: Service, env: Envelope, body: typed_frames.Received, sock: Any, prefix: list[bytes]
    ) -> None:
        """Worker thread: run the handler, then send the reply from this thread (under the socket's lock, or
        queued for the bus thread: ``_send_raw``)."""
        out = self._reply_frame(service, env, body)
        if type(out) is bytes:  # (most often: sent here, not through _answer)
            self._send_raw(sock, [*prefix, out])
        else:
            self._answer(env, out, sock, prefix)

    def _answer(self, env: Envelope, out: bytes | Later | None, sock: Any, prefix: list[bytes]) -> None:
        """Send a reply at once, from this thread (bus or handler); a deferred one when it completes."""
        if out is None:
            return
        if isinstance(out, Later):
            self._defer(env, out, sock, prefix)
        else:
            self._send_raw(sock, [*prefix, out])

    def _defer(self, env: Envelope, later: Later, sock: Any, prefix: list[bytes]) -> None:
        """Track a deferred reply until it completes (send it) or its caller's deadline passed (drop it)."""
        left_s = (env.deadline - now_ms()) / 1000 if env.deadline is not None else DEFERRED_CAP_S
        key = next(self._deferred_seq)
        self._deferred[key] = (time.monotonic() + max(0.0, left_s) + DEFERRED_GRACE_S, later)

        def complete(ok: bool, reply: Any) -> None:
            if self._deferred.pop(key, None) is None:
                return  # dropped: the caller's deadline passed, or the bus stopped
            if ok and reply is not None:  # (encoded: bytes, sent without _answer)
                self._send_raw(sock, [*prefix, self._encode_reply(env, reply)])

        later.then(complete)

    def _sweep_deferred(self, now: float) -> None:
        if now < self._next_sweep:
            return
        self._next_sweep = now + DEFERRED_SWEEP_S
        for key, (deadline, later) in list(self._deferred.items()):
            if deadline < now and self._deferred.pop(key, None) is not None:
                later.drop()
                self.deferred_dropped += 1
                log.warning("bus %s: dropped a deferred reply past its caller's deadline", self.sender)

    def _reply_frame(
        self, service: Service, env: Envelope, body: typed_frames.Received
    ) -> bytes | Later | None:
        """Run the handler on the decoded body; the encoded reply (``None`` for a cast, a ``Later`` if
        deferred), packed straight from the request's fields and the handler's body (no reply envelope)."""
        reply = (
            dispatch_untraced(service, env, self.sender, body, reply_wire)
            if env.trace is None  # (dispatch_wire without its call)
            else dispatch_wire(service, env, sender=self.sender, body=body)
        )
        if reply is None or isinstance(reply, Later):
            return reply
        try:
            return codec.encode_wire(reply)
        except BadRequest:
            return self._encode_reply(env, reply)

    def _encode_reply(self, env: Envelope, reply: dict[str, Any]) -> bytes:
        try:
            return codec.encode_wire(reply)
        except BadRequest as exc:
            message = f"reply not encodable: {exc}"
            return codec.encode_wire(error_wire(env, ErrorCode.INTERNAL.value, message, self.sender))
