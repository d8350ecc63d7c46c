"""Log the tcp peers a CURVE listener refuses before ZAP is asked (no CURVE at all, a wrong server key), with
their address: libzmq reports such a failed handshake only with the listener's own address, so the peer's
is read from the accepted connection's fd (a libzmq socket monitor, run by the bus thread)."""

from __future__ import annotations

import logging
import os
import socket
import time
import uuid

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


def peer_of(fd: int) -> str:
    """``host:port`` of the remote end of the connected tcp socket ``fd``; a peer that already hung up
    (libzmq closed the fd before the monitor event was read) has no address left to read."""
    try:
        with socket.socket(fileno=os.dup(fd)) as s:
            host, port = s.getpeername()[:2]
    except OSError:
        return "an address gone before it could be read"
    return f"{host}:{port}"


class HandshakeWatch:
    """The monitor of one tcp-served ROUTER: a handshake that failed before authentication (libzmq emits
    it, then the same connection's ``DISCONNECTED``) is logged with the address taken at ``ACCEPTED``."""

    def __init__(self, sock: zmq.Socket, endpoint: str) -> None:  # type: ignore[type-arg]
        self.endpoint = endpoint
        self.sock: zmq.Socket = sock.get_monitor_socket(
            EVENTS, addr=f"inproc://geode-monitor-{uuid.uuid4().hex}"
        )  # type: ignore[type-arg]
        self._peers: dict[int, str] = {}  # fd → address, for the connections accepted and still open
        self._failed = ""  # the last failure's reason, waiting for its connection's DISCONNECTED
        self._logged: dict[str, tuple[float, int]] = {}  # host → (last logged at, refusals since)
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
            self._peers[value] = peer_of(value)
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
        host = addr.rsplit(":", 1)[0]
        now = time.monotonic()
        last, since = self._logged.get(host, (-REPEAT_S, 0))
        if now - last < REPEAT_S:
            self._logged[host] = (last, since + 1)
            return
        self._logged[host] = (now, 0)
        more = f" ({since} more since the last line)" if since else ""
        log.warning("refused a tcp peer from %s on %s: %s%s", addr, self.endpoint, reason, more)

    def close(self) -> None:
        self.sock.close(0)


def _reason(value: int) -> str:
    if value == zmq.PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH:
        return "not a CURVE client (security mechanism mismatch)"
    if value == zmq.PROTOCOL_ERROR_ZMTP_CRYPTOGRAPHIC:
        return "CURVE handshake failed (a wrong server key?)"
    return f"handshake failed (libzmq code {value:#x})"
