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

import zmq

POLLIN = zmq.POLLIN
EVENTS = zmq.EVENTS
NOBLOCK = zmq.NOBLOCK


class SharedSocket:
    """``send`` from any thread, ``recv`` on the bus thread, ``close`` once; ``fd`` is what the bus polls."""

    __slots__ = ("closed", "fd", "lock", "sock")

    def __init__(self, sock: zmq.Socket) -> None:  # type: ignore[type-arg]
        self.sock = sock
        self.lock = threading.Lock()
        self.fd = int(sock.getsockopt(zmq.FD))
        self.closed = False

    def send(self, frames: list[bytes], check: bool = True) -> bool:
        """Send ``frames`` without blocking (``zmq.Again`` when the peer's queue is full, ``ZMQError`` when it
        cannot be reached or the socket is closed); True when a received frame now waits to be read (not asked
        without ``check``: the bus thread replying on the socket it is reading until empty anyway)."""
        with self.lock:
            if self.closed:
                raise zmq.ZMQError(errno.ENOTSOCK, "the bus closed this socket")
            sock = self.sock
            if len(frames) == 1:
                sock.send(frames[0], NOBLOCK)
            else:
                sock.send_multipart(frames, NOBLOCK)
            return check and bool(int(sock.getsockopt(EVENTS)) & POLLIN)

    def recv(self) -> list[bytes] | None:
        """One received message's frames, or None when nothing is waiting (or the socket is closed)."""
        with self.lock:
            if self.closed:
                return None
            try:
                return self.sock.recv_multipart(NOBLOCK)
            except zmq.Again:
                return None

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
