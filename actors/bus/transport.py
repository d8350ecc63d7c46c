"""The :class:`~geode.protocol.transport.Transport` that domain clients use over the bus."""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable
from typing import Any, Protocol

from pydantic import BaseModel

from actors.bus.parts import PendingReply
from geode.protocol import catalog
from geode.protocol.envelope import Envelope, now_ms, outgoing
from geode.protocol.transport import unwrap


class BusLink(Protocol):
    """What the transport needs of its bus (``actors.bus.Bus`` is one): its sender name and three sends."""

    sender: str

    def request(self, target: str, env: Envelope, timeout_s: float) -> Envelope: ...

    def request_nowait(self, target: str, env: Envelope) -> PendingReply: ...

    def send_cast(self, target: str, env: Envelope) -> None: ...

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
        env = self._envelope(target, type_, body, session, timeout_s)
        return unwrap(self._bus.request(target, env, timeout_s))

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
        env = self._envelope(target, type_, body, session, timeout_s)
        pending = self._bus.request_nowait(target, env)
        return lambda: unwrap(pending.result(timeout_s))

    def _envelope(
        self, target: str, type_: str, body: Any, session: str | None, timeout_s: float
    ) -> Envelope:
        return outgoing(
            id=f"{self._prefix}{next(self._seq):014x}",
            kind="request",
            type=type_,
            body=catalog.dump(body),
            session=session,
            deadline=now_ms() + int(timeout_s * 1000),
            trace=self._bus.trace_for(target),
            sender=self._bus.sender,
        )

    def cast(
        self,
        target: str,
        type_: str,
        body: BaseModel | dict[str, Any] | None = None,
        *,
        session: str | None = None,
    ) -> None:
        env = outgoing(
            id=f"{self._prefix}{next(self._seq):014x}",
            kind="cast",
            type=type_,
            body=catalog.dump(body),
            session=session,
            trace=self._bus.trace_for(target),
            sender=self._bus.sender,
        )
        self._bus.send_cast(target, env)
