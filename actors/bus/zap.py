"""A ZAP handler (ZeroMQ RFC 27) run by the bus thread: CURVE clients must hold an allowed public key; a
refusal is logged with the peer's address and public key, one line a minute per host and key."""

from __future__ import annotations

import logging

import zmq
from zmq.utils import z85

from actors.bus.endpoints import CurveKeys
from actors.bus.tcp_refusals import REPEAT_S, PeerLogGate, more_since

log = logging.getLogger(__name__)
ZAP_ENDPOINT = "inproc://zeromq.zap.01"


class ZapResponder:
    """The REP socket at :data:`ZAP_ENDPOINT` of one context and the RFC 27 reply; :meth:`decide` says who."""

    refusal = b"refused"

    def __init__(self, ctx: zmq.Context) -> None:  # type: ignore[type-arg]
        self.sock = ctx.socket(zmq.REP)
        self.sock.setsockopt(zmq.LINGER, 0)
        self.sock.bind(ZAP_ENDPOINT)

    def decide(self, frames: list[bytes]) -> bytes | None:
        """The user id to grant the peer of this ZAP request, or None to refuse it."""
        raise NotImplementedError

    def handle(self) -> None:
        while self.sock.get(zmq.EVENTS) & zmq.POLLIN:
            frames = self.sock.recv_multipart(zmq.NOBLOCK)
            version, request_id = frames[0], frames[1] if len(frames) > 1 else b""
            user = self.decide(frames)
            status = (b"200", b"OK") if user is not None else (b"400", self.refusal)
            self.sock.send_multipart([version, request_id, *status, user or b"", b""])

    def close(self) -> None:
        self.sock.close(0)


class ZapHandler(ZapResponder):
    """Answers libzmq's authentication requests for every CURVE server socket of one context."""

    refusal = b"unknown client key"

    def __init__(self, ctx: zmq.Context, keys: CurveKeys) -> None:  # type: ignore[type-arg]
        self.keys = keys
        self.gate = PeerLogGate(REPEAT_S)  # a refused client reconnects every few hundred ms
        super().__init__(ctx)

    def decide(self, frames: list[bytes]) -> bytes | None:
        mechanism = frames[5] if len(frames) > 5 else b""
        curve = mechanism == b"CURVE" and len(frames) > 6 and len(frames[6]) == 32
        key = z85.encode(frames[6]) if curve else b""
        if key and self.keys.accepts(key):
            return b"geode"
        address = frames[3].decode(errors="replace") if len(frames) > 3 else "?"
        now, since = self.gate.admit(f"{address} {key.decode()}")
        if now:
            # a public key (never a secret): what an operator adds to [bus.curve] authorized_keys
            log.warning(
                "rejected a %s client from %s%s%s",
                mechanism.decode(errors="replace"),
                address,
                f" with unknown key {key.decode()}" if key else "",
                more_since(since),
            )
        return None
