"""How domain code talks to other actors without knowing about ZeroMQ.

Domain services implement :class:`Service`; domain clients take a :class:`Transport`. The bus
(``actors.bus``) provides a transport over ZeroMQ; :class:`LocalTransport` runs services in-process
(tests, single-process debugging) with the same encode → validate → handle → encode path.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel

from geode.protocol import catalog, codec
from geode.protocol.envelope import Envelope, now_ms
from geode.protocol.errors import ErrorCode, GeodeError, NotFound, error_from_reply


@dataclass(frozen=True)
class Request:
    """One inbound request or cast, as a service sees it: validated body plus envelope metadata."""

    envelope: Envelope
    body: BaseModel

    @property
    def type(self) -> str:
        return self.envelope.type

    @property
    def session(self) -> str | None:
        return self.envelope.session

    @property
    def sender(self) -> str:
        return self.envelope.sender


@runtime_checkable
class Service(Protocol):
    """Something that answers requests. Return a reply body (model or dict) or raise ``GeodeError``."""

    def handle(self, request: Request) -> BaseModel | dict[str, Any] | None: ...


class Transport(Protocol):
    """Request/reply and one-way casts to a named target (an endpoint or a connected peer)."""

    def call(
        self,
        target: str,
        type_: str,
        body: BaseModel | dict[str, Any] | None = None,
        *,
        session: str | None = None,
        timeout_s: float = 5.0,
    ) -> dict[str, Any]: ...

    def cast(
        self,
        target: str,
        type_: str,
        body: BaseModel | dict[str, Any] | None = None,
        *,
        session: str | None = None,
    ) -> None: ...


def dispatch(service: Service, env: Envelope, *, sender: str = "") -> Envelope | None:
    """Validate, run and wrap one request in a reply envelope (``None`` for casts).

    Used by both the bus and :class:`LocalTransport`, so errors map to codes the same way everywhere.
    """
    try:
        body = catalog.parse_body(env.type, env.body)
        if env.expired():
            raise GeodeError("deadline passed before handling", code=ErrorCode.TIMEOUT)
        out = service.handle(Request(env, body))
        if env.kind == "cast":
            return None
        return env.reply_ok(catalog.dump(out), sender=sender)
    except GeodeError as exc:
        return None if env.kind == "cast" else env.reply_error(exc.code.value, exc.message, sender=sender)
    except Exception as exc:  # a bug in a handler: an `internal` reply, the actor lives on
        import logging

        logging.getLogger(__name__).exception("handler for %s failed", env.type)
        if env.kind == "cast":
            return None
        return env.reply_error(ErrorCode.INTERNAL.value, f"{type(exc).__name__}: {exc}"[:500], sender=sender)


def unwrap(reply: Envelope) -> dict[str, Any]:
    """The body of an ``ok`` reply, or the matching exception for an ``error`` reply."""
    if reply.kind == "error":
        raise error_from_reply(str(reply.body.get("code", "internal")), str(reply.body.get("message", "")))
    return reply.body


class LocalTransport:
    """In-process transport: targets are services registered by name; frames still go through msgpack."""

    def __init__(self, services: dict[str, Service] | None = None, *, sender: str = "local#1") -> None:
        self._services: dict[str, Service] = dict(services or {})
        self._sender = sender
        self._lock = threading.Lock()
        self.cast_log: list[Envelope] = []
        self.on_cast: Callable[[str, Envelope], None] | None = None

    def register(self, target: str, service: Service) -> None:
        with self._lock:
            self._services[target] = service

    def _service(self, target: str) -> Service:
        try:
            return self._services[target]
        except KeyError:
            raise NotFound(f"no service named {target!r}") from None

    def call(self, target, type_, body=None, *, session=None, timeout_s=5.0):  # type: ignore[no-untyped-def]
        env = Envelope(
            type=type_,
            body=catalog.dump(body),
            session=session,
            deadline=now_ms() + int(timeout_s * 1000),
            **{"from": self._sender},
        )
        env = codec.decode(codec.encode(env))
        reply = dispatch(self._service(target), env, sender=target)
        assert reply is not None
        return unwrap(codec.decode(codec.encode(reply)))

    def cast(self, target, type_, body=None, *, session=None):  # type: ignore[no-untyped-def]
        env = Envelope(
            kind="cast", type=type_, body=catalog.dump(body), session=session, **{"from": self._sender}
        )
        env = codec.decode(codec.encode(env))
        self.cast_log.append(env)
        if self.on_cast is not None:
            self.on_cast(target, env)
        if target in self._services:
            dispatch(self._services[target], env, sender=target)
