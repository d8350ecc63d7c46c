"""Log the tcp peers a CURVE listener refuses before ZAP is asked (no CURVE at all, a wrong server key), with
their address: libzmq reports such a failed handshake only with the listener's own address, so the peer's
is read from the accepted connection's fd (a libzmq socket monitor, run by the bus thread). A refused peer
reconnects every few hundred ms: each host is logged one line a minute (:class:`PeerLogGate`, ZAP too)."""

from __future__ import annotations

import logging
import os
import socket
import time
import uuid
from collections.abc import Callable

import zmq
from zmq.utils.monitor import parse_monitor_message

log = logging.getLogger(__name__)
EVENTS = (
    zmq.EVENT_ACCEPTED
    | zmq.EVENT_DISCONNECTED
    | zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL
    | zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL
)
REPEAT_S = 60.0  # one peer that keeps reconnecting is logged once a minute, with a count
MAX_HOSTS = 4096


GONE = "an address gone before it could be read"


def peer_of(fd: int, port: int | None = None) -> str:
    """``host:port`` of the remote end of the connected tcp socket ``fd`` (accepted on ``port``, when given).
    libzmq may have closed the fd before the monitor event was read, and the number may already be another
    socket's (an ipc connection has no address: ``getpeername()`` is empty; another tcp connection has
    another local port): neither is this peer, so no address is given rather than a wrong one."""
    try:
        with socket.socket(fileno=os.dup(fd)) as s:
            if s.family not in (socket.AF_INET, socket.AF_INET6) or s.type != socket.SOCK_STREAM:
                return GONE
            peer, local = s.getpeername(), s.getsockname()
    except OSError:
        return GONE
    if not (isinstance(peer, tuple) and len(peer) >= 2 and isinstance(local, tuple) and len(local) >= 2):
        return GONE
    if port is not None and local[1] != port:
        return GONE
    return f"{peer[0]}:{peer[1]}"


def listen_port(endpoint: str) -> int | None:
    """The port of a ``tcp://host:port`` endpoint (None when it has none, e.g. a wildcard ``*``)."""
    tail = endpoint.rsplit(":", 1)[-1]
    return int(tail) if tail.isdigit() else None


class PeerLogGate:
    """One log line per peer host a minute: :meth:`admit` says whether to log now, and how many refusals of
    that host were kept quiet since its last line. Bounded (the oldest host is forgotten first)."""

    def __init__(self, every_s: float = 60.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.every_s = every_s
        self.clock = clock
        self._seen: dict[str, tuple[float, int]] = {}  # host → (last logged at, refusals since)

    def admit(self, host: str) -> tuple[bool, int]:
        now = self.clock()
        seen = self._seen.get(host)
        if seen is not None and now - seen[0] < self.every_s:
            self._seen[host] = (seen[0], seen[1] + 1)
            return False, 0
        if seen is None and len(self._seen) >= MAX_HOSTS:
            self._seen.pop(next(iter(self._seen)))
        self._seen[host] = (now, 0)
        return True, seen[1] if seen is not None else 0


def more_since(count: int) -> str:
    return f" ({count} more since the last line)" if count else ""


class HandshakeWatch:
    """The monitor of one tcp-served ROUTER: a handshake that failed before authentication (libzmq emits
    it, then the same connection's ``DISCONNECTED``) is logged with the address taken at ``ACCEPTED``."""

    def __init__(
        self,
        sock: zmq.Socket,  # type: ignore[type-arg]
        endpoint: str,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.endpoint = endpoint
        self.port = listen_port(endpoint)
        self.sock: zmq.Socket = sock.get_monitor_socket(
            EVENTS, addr=f"inproc://geode-monitor-{uuid.uuid4().hex}"
        )  # type: ignore[type-arg]
        self._peers: dict[int, str] = {}  # fd → address, for the connections accepted and still open
        self._failed = ""  # the last failure's reason, waiting for its connection's DISCONNECTED
        self.gate = PeerLogGate(REPEAT_S, clock)
        self.refused = 0

    def handle(self) -> None:
        for _ in range(256):
            try:
                frames = self.sock.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                return
            try:
                ev = parse_monitor_message(frames)
            except RuntimeError:
                continue
            self._on(int(ev["event"]), int(ev["value"]))

    def _on(self, event: int, value: int) -> None:
        if event == zmq.EVENT_ACCEPTED:
            self._peers[value] = peer_of(value, self.port)
        elif event == zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL:
            self._failed = _reason(value)
        elif event == zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL:  # ``value`` is an errno
            self._failed = f"handshake failed ({os.strerror(value) if value > 0 else 'no detail'})"
        elif event == zmq.EVENT_DISCONNECTED:
            addr = self._peers.pop(value, "?")
            if self._failed:
                self._refused(addr, self._failed)
                self._failed = ""

    def _refused(self, addr: str, reason: str) -> None:
        self.refused += 1
        now, since = self.gate.admit(addr.rsplit(":", 1)[0])
        if now:
            more = more_since(since)
            log.warning("refused a tcp peer from %s on %s: %s%s", addr, self.endpoint, reason, more)

    def close(self) -> None:
        self.sock.close(0)


def _reason(value: int) -> str:
    if value == zmq.PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH:
        return "not a CURVE client (security mechanism mismatch)"
    if value == zmq.PROTOCOL_ERROR_ZMTP_CRYPTOGRAPHIC:
        return "CURVE handshake failed (a wrong server key?)"
    return f"handshake failed (libzmq code {value:#x})"
