"""A ZAP handler (ZeroMQ RFC 27) run by the bus thread: CURVE clients must hold an allowed public key."""

from __future__ import annotations

import logging

import zmq
from zmq.utils import z85

from actors.bus.endpoints import CurveKeys

log = logging.getLogger(__name__)
ZAP_ENDPOINT = "inproc://zeromq.zap.01"


class ZapHandler:
    """Answers libzmq's authentication requests for every CURVE server socket of one context."""

    def __init__(self, ctx: zmq.Context, keys: CurveKeys) -> None:  # type: ignore[type-arg]
        self.keys = keys
        self.sock = ctx.socket(zmq.REP)
        self.sock.setsockopt(zmq.LINGER, 0)
        self.sock.bind(ZAP_ENDPOINT)

    def handle(self) -> None:
        while self.sock.get(zmq.EVENTS) & zmq.POLLIN:
            frames = self.sock.recv_multipart(zmq.NOBLOCK)
            version, request_id = frames[0], frames[1] if len(frames) > 1 else b""
            mechanism = frames[5] if len(frames) > 5 else b""
            ok = mechanism == b"CURVE" and len(frames) > 6 and self.keys.accepts(z85.encode(frames[6]))
            if not ok:
                log.warning(
                    "rejected a %s client from %s",
                    mechanism.decode(errors="replace"),
                    frames[3].decode(errors="replace") if len(frames) > 3 else "?",
                )
            status = (b"200", b"OK") if ok else (b"400", b"unknown client key")
            self.sock.send_multipart([version, request_id, *status, b"" if not ok else b"geode", b""])

    def close(self) -> None:
        self.sock.close(0)
