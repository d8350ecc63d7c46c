"""A bus ROUTER or DEALER that any thread of its process sends on itself, every use under the socket's lock.

pyzmq sockets are not thread-safe, so every send, receive and close of a :class:`SharedSocket` holds its
lock (never across a blocking call: each operation is ``NOBLOCK``). The bus thread does not poll the socket
itself but its ``ZMQ_FD``, which is edge-triggered: it becomes readable when the socket's state may have
changed, and any operation on the socket (a send from another thread too) may consume that edge. So the
reader receives until the socket has nothing left, and every send reads ``ZMQ_EVENTS`` under the same lock
and reports a frame waiting to be read: the sender then wakes the bus thread (``PollLoop._readable``), which
would otherwise sleep on a frame that arrived while the send ran. See docs/runtime.md, "Threads".
"""

from __future__ import annotations

import errno
import threading
from typing import Protocol

import zmq

POLLIN = zmq.POLLIN
EVENTS = zmq.EVENTS
NOBLOCK = zmq.NOBLOCK


class Reader(Protocol):
    """What a send asks of the waiters reading a DEALER (``actors.bus.reply_reader.ReplyReader``)."""

    @property
    def active(self) -> bool: ...  # its waiters read it (False: the bus thread does)

    @property
    def leader(self) -> object: ...  # the waiter reading it now, or None

    def kick(self) -> None: ...  # wake the leader


class SharedSocket:
    """``send`` from any thread, ``recv`` on the bus thread, ``close`` once; ``fd`` is what the bus polls."""

    __slots__ = ("closed", "fd", "lock", "reader", "sock")

    def __init__(self, sock: zmq.Socket) -> None:  # type: ignore[type-arg]
        self.sock = sock
        self.lock = threading.Lock()
        self.fd = int(sock.getsockopt(zmq.FD))
        self.closed = False
        self.reader: Reader | None = None  # a request-only DEALER: its waiters read it, not the bus

    def send(self, frames: list[bytes], check: bool = True) -> bool:
        """Send ``frames`` without blocking (``zmq.Again`` when the peer's queue is full, ``ZMQError`` when it
        cannot be reached or the socket is closed); True when a received frame now waits to be read (not asked
        without ``check``: the bus thread replying on the socket it is reading until empty anyway; nor on a
        DEALER its waiters read while none does: the next one reads before it sleeps)."""
        with self.lock:
            if self.closed:
                raise zmq.ZMQError(errno.ENOTSOCK, "the bus closed this socket")
            sock = self.sock
            if len(frames) == 1:
                sock.send(frames[0], NOBLOCK)
            else:
                sock.send_multipart(frames, NOBLOCK)
            reader = self.reader  # a leader is named before it reads under this lock: no wake can be lost
            if not check or (reader is not None and reader.active and reader.leader is None):
                return False
            return bool(int(sock.getsockopt(EVENTS)) & POLLIN)

    def recv(self) -> list[bytes] | None:
        """One received message's frames, or None when nothing is waiting (or the socket is closed)."""
        with self.lock:
            if self.closed:
                return None
            try:
                return self.sock.recv_multipart(NOBLOCK)
            except zmq.Again:
                return None

    def drain(self, cap: int) -> list[bytes] | None:
        """Every frame waiting on a DEALER (up to ``cap``), or None when the socket is closed. Reads until the
        socket is empty, which re-arms the edge of ``fd``; one ``recv`` a frame (a peer's reply is one frame:
        ``recv_multipart`` would ask ``RCVMORE`` too, ~1 µs, and ``ZMQ_EVENTS`` before each read ~2 µs)."""
        with self.lock:
            if self.closed:
                return None
            sock, out = self.sock, list[bytes]()
            try:
                while len(out) < cap:
                    out.append(sock.recv(NOBLOCK))
            except zmq.Again:
                pass
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
