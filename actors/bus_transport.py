"""The :class:`~geode.protocol.transport.Transport` that domain clients use over the bus."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from geode.protocol import catalog
from geode.protocol.envelope import Envelope, now_ms
from geode.protocol.transport import unwrap

if TYPE_CHECKING:
    from actors.bus import Bus


class BusTransport:
    """``call`` blocks for the reply (or raises its error / ``RequestTimeout``); ``cast`` is one-way."""

    def __init__(self, bus: Bus) -> None:
        self._bus = bus

    def call(
        self,
        target: str,
        type_: str,
        body: BaseModel | dict[str, Any] | None = None,
        *,
        session: str | None = None,
        timeout_s: float = 5.0,
    ) -> dict[str, Any]:
        env = Envelope(
            type=type_,
            body=catalog.dump(body),
            session=session,
            deadline=now_ms() + int(timeout_s * 1000),
            **{"from": self._bus.sender},
        )
        return unwrap(self._bus.request(target, env, timeout_s))

    def cast(
        self,
        target: str,
        type_: str,
        body: BaseModel | dict[str, Any] | None = None,
        *,
        session: str | None = None,
    ) -> None:
        env = Envelope(
            kind="cast", type=type_, body=catalog.dump(body), session=session, **{"from": self._bus.sender}
        )
        self._bus.send_cast(target, env)
