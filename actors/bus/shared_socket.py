"""A bus ROUTER or DEALER that any thread of its process sends on itself, every use under the socket's lock.

pyzmq sockets are not thread-safe, so every send, receive and close of a :class:`SharedSocket` holds its
lock (never across a blocking call: each operation is ``NOBLOCK``). The bus thread does not poll the socket
itself but its ``ZMQ_FD``, which is edge-triggered: it becomes readable when the socket's state may have
changed, and any operation on the socket (a send from another thread too) may consume that edge. So the
reader receives until the socket has nothing left, and every send reads ``ZMQ_EVENTS`` under the same lock
and reports a frame waiting to be read: the sender then wakes the bus thread (``PollLoop._readable``), which
would otherwise sleep on a frame that arrived while the send ran. See docs/runtime.md, "Threads".

A drain ends without raising: after a frame's work its reader asks ``ZMQ_EVENTS`` (:meth:`readable`, ~1.5 µs,
which re-arms the edge as an empty receive does) instead of receiving until ``zmq.Again`` (~3.5 to 5 µs: pyzmq
builds the exception, with two imports, on every empty ``NOBLOCK`` receive). Only a burst (a second frame
waiting) is read on until ``Again``, once for the burst. Each ``Again`` raised is counted (``RECV_EMPTY``).
"""

from __future__ import annotations

import errno
import logging
import threading
from typing import Protocol

import zmq

from geode.protocol import codec
from geode.work_tally import count as tally

log = logging.getLogger("actors.bus.socket_thread")

# plain ints: ``x & zmq.POLLIN`` with pyzmq's IntFlag runs enum.Flag.__rand__ in Python (~1 µs a send)
POLLIN = int(zmq.POLLIN)
EVENTS = int(zmq.EVENTS)
NOBLOCK = int(zmq.NOBLOCK)
SNDMORE_NOBLOCK = int(zmq.SNDMORE) | NOBLOCK  # pyzmq's send_multipart ORs the IntFlags per part (enum calls)
# pyzmq's Socket.send is a Python wrapper over the backend's (it only adds the draft API's routing_id and
# group, which the bus never uses): a socket of that class sends through the backend's, one frame fewer
_SUGAR_SEND = zmq.Socket.send
_BACKEND_SEND = zmq.backend.Socket.send
RECV_EMPTY = "bus.recv_empty"  # work tally: a NOBLOCK receive on a bus socket that found nothing (zmq.Again)
BATCH_SENT = "bus.batch_sent"  # work tally: a batch frame sent (several replies to one peer in one message)
# replies the bus thread holds while it reads a burst (SharedSocket.release): sent together past these
HOLD_MAX_PARTS = 16
HOLD_MAX_BYTES = 256 * 1024
HOLD_MAX_FRAME = 64 * 1024  # a larger reply is sent alone (what is held goes first)


def _waiting(sock: zmq.Socket) -> bool:  # type: ignore[type-arg]
    """A received frame waits on ``sock`` (``ZMQ_EVENTS``: also re-arms the edge of its fd when none does)."""
    return bool(sock.get(EVENTS) & POLLIN)  # type: ignore[operator]  # an int for EVENTS


class Reader(Protocol):
    """What a send asks of the waiters reading a DEALER (``actors.bus.reply_reader.ReplyReader``)."""

    @property
    def active(self) -> bool: ...  # its waiters read it (False: the bus thread does)

    @property
    def leader(self) -> object: ...  # the waiter reading it now, or None

    def kick(self) -> None: ...  # wake the leader


class SharedSocket:
    """``send`` from any thread, ``recv`` on the bus thread, ``close`` once; ``fd`` is what the bus polls."""

    __slots__ = ("_send", "closed", "fd", "held", "held_bytes", "lock", "reader", "sock")

    def __init__(self, sock: zmq.Socket) -> None:  # type: ignore[type-arg]
        self.sock = sock
        send = type(sock).send
        self._send = _BACKEND_SEND if send is _SUGAR_SEND else send  # (socket, data, flags)
        self.lock = threading.Lock()
        self.fd = int(sock.getsockopt(zmq.FD))
        self.closed = False
        self.reader: Reader | None = None  # a request-only DEALER: its waiters read it, not the bus
        # a ROUTER's replies held by the bus thread reading a burst ([rid, frame] each), None when not holding
        self.held: list[list[bytes]] | None = None
        self.held_bytes = 0

    def send(self, frames: list[bytes], check: bool = True) -> bool:
        """Send ``frames`` without blocking (``zmq.Again`` when the peer's queue is full, ``ZMQError`` when it
        cannot be reached or the socket is closed); True when a received frame now waits to be read (not asked
        without ``check``: the bus thread replying on the socket it is reading until empty anyway; nor on a
        DEALER its waiters read while none does: the next one reads before it sleeps)."""
        with self.lock:
            if self.closed:
                raise zmq.ZMQError(errno.ENOTSOCK, "the bus closed this socket")
            held = self.held
            if held is not None:  # the bus thread reads a burst: its replies wait to go out together
                if not check and len(frames) == 2 and len(frames[1]) <= HOLD_MAX_FRAME:
                    held.append(frames)
                    self.held_bytes += len(frames[1])
                    if len(held) >= HOLD_MAX_PARTS or self.held_bytes >= HOLD_MAX_BYTES:
                        self._flush()
                    return False
                if held:
                    self._flush()  # any other send: what is held goes first (each peer's order kept)
            sock, send = self.sock, self._send
            for part in frames[:-1]:  # a ROUTER's routing id (bytes, as every part here)
                send(sock, part, SNDMORE_NOBLOCK)
            send(sock, frames[-1], NOBLOCK)
            reader = self.reader  # a leader is named before it reads under this lock: no wake can be lost
            if not check or (reader is not None and reader.active and reader.leader is None):
                return False
            return _waiting(sock)

    def release(self) -> bool:
        """Send the replies held while the bus thread read a burst on this ROUTER and stop holding; True when
        a received frame now waits (asked after a send, as :meth:`send` asks: it may have consumed the edge
        of ``fd``). Holding: the bus thread sets ``held`` to ``[]`` (from None only; a sender reads it under
        the lock); its inline replies (``check`` False) are then held, up to ``HOLD_MAX_PARTS`` /
        ``HOLD_MAX_BYTES``, and each peer's go out as one batch frame (``codec.encode_batch``); any other send
        sends what is held first."""
        with self.lock:
            held, self.held, self.held_bytes = self.held, None, 0
            if self.closed:
                return False
            sock, send = self.sock, self._send
            if not held:  # (none, or sent already at the cap: asked all the same)
                pass
            elif len(held) == 1:  # (a burst's last reply alone: sent as it is, without _flush's call)
                try:
                    send(sock, held[0][0], SNDMORE_NOBLOCK)
                    send(sock, held[0][1], NOBLOCK)
                except zmq.ZMQError as exc:
                    log.warning("send dropped: %s", exc)
            else:
                self.held = held
                self._flush()
                self.held = None
            return bool(sock.get(EVENTS) & POLLIN)  # type: ignore[operator]  # _waiting, no call

    def _flush(self) -> None:
        """Send the held replies (under the lock, not closed): consecutive ones to one peer as one batch
        frame, a lone one as it is. A refused send drops that peer's replies with a warning (``_send_raw``'s
        rule)."""
        held, self.held, self.held_bytes = self.held or [], [], 0
        sock, send, i, n = self.sock, self._send, 0, len(held)
        while i < n:
            rid, j = held[i][0], i + 1
            while j < n and held[j][0] == rid:
                j += 1
            if j - i == 1:
                frame = held[i][1]
            else:
                frame = codec.encode_batch([f[1] for f in held[i:j]])
                tally(BATCH_SENT)
            try:
                send(sock, rid, SNDMORE_NOBLOCK)
                send(sock, frame, NOBLOCK)
            except zmq.ZMQError as exc:
                log.warning("send dropped: %d replies: %s", j - i, exc)
            i = j

    def recv(self) -> list[bytes] | None:
        """One received message's frames, or None when nothing is waiting (or the socket is closed)."""
        with self.lock:
            if self.closed:
                return None
            sock = self.sock
            try:
                part = sock.recv(NOBLOCK, copy=False)
            except zmq.Again:
                tally(RECV_EMPTY)
                return None
            parts = []
            while part.more:  # the rest of a multipart message is there once its first part is
                parts.append(part.bytes)
                part = sock.recv(NOBLOCK, copy=False)
            parts.append(part.bytes)
            return parts

    def recv_burst(self, cap: int) -> list[list[bytes]]:
        """The messages waiting (each its frames), up to ``cap``, none when the socket is closed: after the
        first, ``ZMQ_EVENTS`` is asked (most often nothing more: a peer in lock-step waits for this reply),
        a burst read until ``zmq.Again`` or the cap. A reader that sends after it must ask ``ZMQ_EVENTS``
        before it sleeps (a send may consume the edge of ``fd``)."""
        with self.lock:
            out: list[list[bytes]] = []
            if self.closed:
                return out
            sock = self.sock
            try:
                while len(out) < cap:
                    part = sock.recv(NOBLOCK, copy=False)
                    parts = []
                    while part.more:
                        parts.append(part.bytes)
                        part = sock.recv(NOBLOCK, copy=False)
                    parts.append(part.bytes)
                    out.append(parts)
                    if len(out) == 1 and not sock.get(EVENTS) & POLLIN:  # type: ignore[operator]
                        break  # one frame (the next request of a peer in lock-step not sent yet): no Again
            except zmq.Again:
                tally(RECV_EMPTY)
            return out

    def readable(self) -> bool:
        """True when a received frame waits (``ZMQ_EVENTS``). False re-arms the edge of ``fd``, as an empty
        receive does: a reader that asks this after a frame's work, its reply sent, may sleep on ``fd``."""
        with self.lock:  # (_waiting's test, not its call: after every frame read)
            return not self.closed and bool(self.sock.get(EVENTS) & POLLIN)  # type: ignore[operator]

    def drain(self, cap: int, look: bool = False) -> list[bytes] | None:
        """Every frame waiting on a DEALER (up to ``cap``), or None when the socket is closed; what it leaves
        is nothing, so the edge of ``fd`` is re-armed. ``look``: ask ``ZMQ_EVENTS`` first (the reader was not
        told the socket is readable). One frame ends with ``ZMQ_EVENTS``; a burst is read until ``zmq.Again``
        (one ``recv`` a frame: a peer's reply is one frame). ``cap`` 1 without ``look`` (the fd woke its
        reader): one frame and no ``ZMQ_EVENTS`` after it, so the edge is NOT re-armed: the reader must
        drain with ``look`` before it sleeps on ``fd`` (``ReplyReader._lead``)."""
        with self.lock:
            if self.closed:
                return None
            sock, out = self.sock, list[bytes]()
            if look and not sock.get(EVENTS) & POLLIN:  # type: ignore[operator]  # _waiting, no call
                return out
            try:
                out.append(sock.recv(NOBLOCK))
                if cap > 1 and _waiting(sock):  # a burst: read on, one Again for all of it
                    while len(out) < cap:
                        out.append(sock.recv(NOBLOCK))
            except zmq.Again:
                tally(RECV_EMPTY)
            return out

    def monitor(self, events: int, addr: str) -> zmq.Socket:  # type: ignore[type-arg]
        """A monitor socket for this socket's ``events`` (made under the lock: a use of the socket)."""
        with self.lock:
            return self.sock.get_monitor_socket(events, addr=addr)

    def close(self) -> None:
        with self.lock:
            if not self.closed:
                self.closed = True
                try:
                    self.sock.close(0)
                except zmq.ZMQError:
                    pass
