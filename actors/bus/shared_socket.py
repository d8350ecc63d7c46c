"""A bus ROUTER or DEALER that any thread of its process sends on itself, every use under the socket's lock.

pyzmq sockets are not thread-safe, so every send, receive and close of a :class:`SharedSocket` holds its
lock (never across a blocking call: each operation is ``NOBLOCK``). The bus thread does not poll the socket
itself but its ``ZMQ_FD``, which is edge-triggered: it becomes readable when the socket's state may have
changed, and any operation on the socket (a send from another thread too) may consume that edge. So the
reader receives until the socket has nothing left, and every send reads ``ZMQ_EVENTS`` under the same lock
and reports a frame waiting to be read: the sender then wakes the bus thread (``PollLoop._readable``), which
would otherwise sleep on a frame that arrived while the send ran. See docs/runtime.md, "Threads".

A reply (:meth:`reply`: a handler thread's, a deferred one's) never waits for the lock: when another thread
holds it (the bus thread reading a burst, another handler sending) the reply goes into ``outbox``, and every
use of the lock ends by sending what the outbox holds (:meth:`_let_go`; on a ``batch`` wire each peer's
replies as batch frames). At 100 requests in flight in pool mode the handler threads no longer queue on the
lock behind the bus thread's receives, and their replies leave in fewer ZeroMQ messages.

A drain ends without raising: after a frame's work its reader asks ``ZMQ_EVENTS`` (:meth:`readable`, ~1.5 µs,
which re-arms the edge as an empty receive does) instead of receiving until ``zmq.Again`` (~3.5 to 5 µs: pyzmq
builds the exception, with two imports, on every empty ``NOBLOCK`` receive). Only a burst (a second frame
waiting) is read on until ``Again``, once for the burst. Each ``Again`` raised is counted (``RECV_EMPTY``).
"""

from __future__ import annotations

import errno
import logging
import threading
from collections import deque
from collections.abc import Callable
from typing import Protocol

import zmq

from actors.bus import socket_options  # noqa: F401  (pyzmq's option lookup without an Enum call)
from geode.protocol import codec
from geode.work_tally import ON as TALLY_ON
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
REPLY_QUEUED = "bus.reply_queued"  # work tally: a reply left in the outbox for the lock's holder to send
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

    __slots__ = (
        "_send",
        "batch",
        "closed",
        "fd",
        "held",
        "held_bytes",
        "lock",
        "on_waiting",
        "outbox",
        "reader",
        "sock",
    )

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
        # replies of threads that found the lock taken ([rid, frame] each): its holder sends them on let-go
        self.outbox: deque[list[bytes]] = deque()
        self.batch = False  # its peers take batch frames (a ROUTER of this tree, not on tcp): outbox batched
        self.on_waiting: Callable[[], None] | None = None  # a frame waits after an outbox send: have it read

    def send(self, frames: list[bytes], check: bool = True) -> bool:
        """Send ``frames`` without blocking (``zmq.Again`` when the peer's queue is full, ``ZMQError`` when it
        cannot be reached or the socket is closed); True when a received frame now waits to be read (not asked
        without ``check``: the bus thread replying on the socket it is reading until empty anyway; nor on a
        DEALER its waiters read while none does: the next one reads before it sleeps)."""
        try:  # (one frame: every request and inline reply is sent here)
            with self.lock:
                if self.closed:
                    raise zmq.ZMQError(errno.ENOTSOCK, "the bus closed this socket")
                if self.outbox:  # (queued before this send: they go first)
                    self._send_outbox()
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
                reader = self.reader  # a leader is named before it reads under this lock: no wake lost
                if not check or (reader is not None and reader.active and reader.leader is None):
                    return False
                return bool(sock.get(EVENTS) & POLLIN)  # type: ignore[operator]  # _waiting, no call
        finally:
            if self.outbox:  # queued by threads that found the lock taken: sent now it is free
                self._let_go()

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
            if self.outbox:
                self._send_outbox()
            waiting = bool(sock.get(EVENTS) & POLLIN)  # type: ignore[operator]  # _waiting, no call
        if self.outbox:
            self._let_go()
        return waiting

    def reply(self, frames: list[bytes]) -> bool:
        """Send a reply (``[rid, frame]`` on a ROUTER) from any thread without waiting for the lock: when
        another thread holds it (the bus thread reading, another handler sending), the reply goes into
        ``outbox`` and that holder sends it as it lets go (on a ``batch`` wire each peer's queued replies as
        batch frames, else one by one), or this thread does if the lock came free meanwhile. No reply waits
        for anything but the lock's current use. True when a received frame now waits (as :meth:`send`); a
        frame found waiting after a send done for others is reported through ``on_waiting``. A refused send
        raises for the caller's own reply, and drops a queued one with a warning (``_send_raw``'s rule)."""
        lock = self.lock
        own: list[bytes] | None = frames
        if not lock.acquire(False):
            if len(frames) != 2 or len(frames[1]) > HOLD_MAX_FRAME:
                return self.send(frames)
            self.outbox.append(frames)
            if TALLY_ON:  # (a call to a no-op otherwise)
                tally(REPLY_QUEUED)
            if not lock.acquire(False):
                return False  # its holder has not let go yet: it sends the outbox when it does (_let_go)
            own = None  # in the outbox: sent with it
        try:
            if self.closed:
                self.outbox.clear()
                if own is None:
                    return False
                raise zmq.ZMQError(errno.ENOTSOCK, "the bus closed this socket")
            if self.held:  # the bus thread's held replies go first (as send's other sends)
                self._flush()
            if self.outbox:
                self._send_outbox()
            sock = self.sock
            if own is not None:
                send = self._send
                for part in own[:-1]:
                    send(sock, part, SNDMORE_NOBLOCK)
                send(sock, own[-1], NOBLOCK)
            reader = self.reader
            waiting = (reader is None or not reader.active or reader.leader is not None) and _waiting(sock)
        finally:
            lock.release()
        if self.outbox:
            self._let_go()
        return waiting

    def queue(self, frames: list[bytes]) -> bool:
        """Put a reply (``[rid, frame]``, at most ``HOLD_MAX_FRAME``) into ``outbox`` for the bus thread,
        which sends it before it sleeps (``actors.bus.reply_outbox``). False (not queued) for any other
        send, or on a closed socket (sent as before: :meth:`reply` raises)."""
        if len(frames) != 2 or len(frames[1]) > HOLD_MAX_FRAME or self.closed:
            return False
        self.outbox.append(frames)
        if TALLY_ON:  # (a call to a no-op otherwise: every reply queued)
            tally(REPLY_QUEUED)
        return True

    def _let_go(self) -> None:
        """After a use of the lock, the outbox not empty: the replies queued by threads that found it taken
        (and found it taken again right after queuing: so they count on this holder) are sent, unless another
        thread took the lock meanwhile (then it sends them as it lets go). A frame found waiting after these
        sends is reported through ``on_waiting`` (a send may consume the edge of ``fd``)."""
        lock, outbox, waiting = self.lock, self.outbox, False
        while outbox and lock.acquire(False):
            try:
                if self.closed:
                    outbox.clear()
                    return
                self._send_outbox()
                waiting = _waiting(self.sock)
            finally:
                lock.release()
        if waiting and self.on_waiting is not None:
            self.on_waiting()

    def _send_outbox(self) -> None:
        """Send what ``outbox`` holds (under the lock, not closed), in order."""
        outbox, items = self.outbox, []
        while outbox:  # (only the lock's holder takes from it; other threads only append)
            items.append(outbox.popleft())
        self._send_grouped(items, self.batch)

    def _flush(self) -> None:
        """Send the held replies (under the lock, not closed): consecutive ones to one peer as one batch
        frame, a lone one as it is."""
        held, self.held, self.held_bytes = self.held or [], [], 0
        self._send_grouped(held, True)

    def _send_grouped(self, items: list[list[bytes]], batch: bool) -> None:
        """Send ``[rid, frame]`` items in order (under the lock, not closed); with ``batch``, consecutive ones
        to one peer as one batch frame of at most ``HOLD_MAX_PARTS`` / ``HOLD_MAX_BYTES``. A refused send
        drops that message's replies with a warning (``_send_raw``'s rule)."""
        sock, send, i, n = self.sock, self._send, 0, len(items)
        while i < n:
            rid, j, size = items[i][0], i + 1, len(items[i][1])
            if batch:
                while j < n and j - i < HOLD_MAX_PARTS and items[j][0] == rid:
                    size += len(items[j][1])
                    if size > HOLD_MAX_BYTES:
                        break
                    j += 1
            if j - i == 1:
                frame = items[i][1]
            else:
                frame = codec.encode_batch([f[1] for f in items[i:j]])
                tally(BATCH_SENT)
            try:
                send(sock, rid, SNDMORE_NOBLOCK)
                send(sock, frame, NOBLOCK)
            except zmq.ZMQError as exc:
                log.warning("send dropped: %d replies: %s", j - i, exc)
            i = j

    def recv(self) -> list[bytes] | None:
        """One received message's frames, or None when nothing is waiting (or the socket is closed)."""
        try:
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
        finally:
            if self.outbox:  # queued by threads that found the lock taken
                self._let_go()

    def recv_burst(self, cap: int) -> list[list[bytes]]:
        """The messages waiting (each its frames), up to ``cap``, none when the socket is closed: after the
        first, ``ZMQ_EVENTS`` is asked (most often nothing more: a peer in lock-step waits for this reply),
        a burst read until ``zmq.Again`` or the cap. A reader that sends after it must ask ``ZMQ_EVENTS``
        before it sleeps (a send may consume the edge of ``fd``)."""
        try:
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
                            break  # one frame (a peer in lock-step has not sent its next yet): no Again
                except zmq.Again:
                    tally(RECV_EMPTY)
                return out
        finally:
            if self.outbox:  # queued by threads that found the lock taken
                self._let_go()

    def readable(self) -> bool:
        """True when a received frame waits (``ZMQ_EVENTS``). False re-arms the edge of ``fd``, as an empty
        receive does: a reader that asks this after a frame's work, its reply sent, may sleep on ``fd``."""
        try:
            with self.lock:  # (_waiting's test, not its call: after every frame read)
                return not self.closed and bool(self.sock.get(EVENTS) & POLLIN)  # type: ignore[operator]
        finally:
            if self.outbox:  # queued by threads that found the lock taken
                self._let_go()

    def drain(self, cap: int, look: bool = False) -> list[bytes] | None:
        """Every frame waiting on a DEALER (up to ``cap``), or None when the socket is closed; what it leaves
        is nothing, so the edge of ``fd`` is re-armed. ``look``: ask ``ZMQ_EVENTS`` first (the reader was not
        told the socket is readable). One frame ends with ``ZMQ_EVENTS``; a burst is read until ``zmq.Again``
        (one ``recv`` a frame: a peer's reply is one frame). ``cap`` 1 without ``look`` (the fd woke its
        reader): one frame and no ``ZMQ_EVENTS`` after it, so the edge is NOT re-armed: the reader must
        drain with ``look`` before it sleeps on ``fd`` (``ReplyReader._lead``)."""
        try:
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
        finally:
            if self.outbox:  # queued by threads that found the lock taken
                self._let_go()

    def monitor(self, events: int, addr: str) -> zmq.Socket:  # type: ignore[type-arg]
        """A monitor socket for this socket's ``events`` (made under the lock: a use of the socket)."""
        with self.lock:
            return self.sock.get_monitor_socket(events, addr=addr)

    def close(self) -> None:
        with self.lock:
            if not self.closed:
                self.closed = True
                self.outbox.clear()  # (replies after stop: nobody to send them, as a send after close)
                try:
                    self.sock.close(0)
                except zmq.ZMQError:
                    pass
