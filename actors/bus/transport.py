"""The :class:`~geode.protocol.transport.Transport` that domain clients use over the bus."""

from __future__ import annotations

import itertools
import os
import time
from collections.abc import Callable
from typing import Any, Protocol

from pydantic import BaseModel

from actors.bus.parts import PendingReply
from geode.protocol import catalog, codec
from geode.protocol.envelope import outgoing_wire
from geode.protocol.transport import unwrap
from geode.telemetry import spans

_TRACING = spans._state  # its ``backend`` is None while tracing is off (spans.enabled() without its call)


def request_frame(
    bus: Any, mid: str, target: str, type_: str, body: Any, session: str | None, timeout_s: float
) -> bytes:
    """A request's frame packed straight from its fields (``outgoing_wire``: no ``Envelope`` built to be read
    back), its deadline ``timeout_s`` from now, its trace context the bus's for ``target`` (none asked while
    tracing is off: ``Bus.trace_for`` would give None)."""
    wire = outgoing_wire(
        id=mid,
        kind="request",
        type=type_,
        body=body if body.__class__ is dict else catalog.dump(body),  # (a map as it is: no dump call)
        session=session,
        deadline=time.time_ns() // 1_000_000 + int(timeout_s * 1000),  # (now_ms() without its call)
        trace=bus.trace_for(target) if _TRACING.backend is not None else None,  # (off: no 2 calls a request)
        sender=bus.sender,
    )
    return codec.encode_wire(wire)


class BusLink(Protocol):
    """What the transport needs of its bus (``actors.bus.Bus`` is one): its sender name, two sends of a packed
    frame and the trace for a target."""

    sender: str

    def send_request(
        self, target: str, frame: bytes, mid: str, type_: str, blocking: bool = False
    ) -> PendingReply: ...

    def send_cast_frame(self, target: str, frame: bytes) -> None: ...

    def trace_for(self, target: str) -> str | None: ...


class BusTransport:
    """``call`` blocks for the reply (or raises its error / ``RequestTimeout``); ``cast`` is one-way."""

    def __init__(self, bus: BusLink) -> None:
        self._bus = bus
        # unique ids without a getrandom() syscall per message: a random per-bus prefix and a counter
        self._prefix = os.urandom(5).hex()
        self._seq = itertools.count(1)

    def call(
        self,
        target: str,
        type_: str,
        body: BaseModel | dict[str, Any] | None = None,
        *,
        session: str | None = None,
        timeout_s: float = 5.0,
    ) -> dict[str, Any]:
        mid = f"{self._prefix}{next(self._seq):014x}"  # (packed and sent here, not through a helper's call)
        frame = request_frame(self._bus, mid, target, type_, body, session, timeout_s)
        reply = self._bus.send_request(target, frame, mid, type_, True).result(timeout_s)
        return reply.body if reply.kind != "error" else unwrap(reply)  # (an ok reply: no unwrap call)

    def call_nowait(
        self,
        target: str,
        type_: str,
        body: BaseModel | dict[str, Any] | None = None,
        *,
        session: str | None = None,
        timeout_s: float = 5.0,
    ) -> Callable[[], dict[str, Any]]:
        """Send now, collect later: returns ``result()`` which blocks for the reply body (pipelining)."""
        mid = f"{self._prefix}{next(self._seq):014x}"
        frame = request_frame(self._bus, mid, target, type_, body, session, timeout_s)
        pending = self._bus.send_request(target, frame, mid, type_, False)
        return lambda: unwrap(pending.result(timeout_s))

    def cast(
        self,
        target: str,
        type_: str,
        body: BaseModel | dict[str, Any] | None = None,
        *,
        session: str | None = None,
    ) -> None:
        wire = outgoing_wire(
            id=f"{self._prefix}{next(self._seq):014x}",
            kind="cast",
            type=type_,
            body=catalog.dump(body),
            session=session,
            trace=self._bus.trace_for(target) if _TRACING.backend is not None else None,
            sender=self._bus.sender,
        )
        self._bus.send_cast_frame(target, codec.encode_wire(wire))
