"""How domain code talks to other actors without knowing about ZeroMQ.

Domain services implement :class:`Service`; domain clients take a :class:`Transport`. The bus
(``actors.bus``) provides a transport over ZeroMQ; :class:`LocalTransport` runs services in-process
(tests, single-process debugging) with the same encode → validate → handle → encode path.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel

from geode.protocol import catalog, codec, typed_frames
from geode.protocol.envelope import Envelope, now_ms, reply_envelope, reply_wire
from geode.protocol.errors import ErrorCode, GeodeError, NotFound, RequestTimeout, error_from_reply
from geode.protocol.later import Later, Settled
from geode.telemetry import spans

DEFERRED_CAP_S = 300.0  # how long a deferred reply without a deadline may stay outstanding


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
    """Something that answers requests. Return a reply body (model or dict) or raise ``GeodeError``; or
    return a :class:`Later` and complete it from another thread (a deferred reply)."""

    def handle(self, request: Request) -> BaseModel | dict[str, Any] | Later | None: ...


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


Reply = Any  # an Envelope (dispatch_later) or its wire map (dispatch_wire): what a ReplyMaker makes
ReplyMaker = Callable[[Envelope, Literal["ok", "error"], Any, str], Reply]


def dispatch_later(
    service: Service, env: Envelope, *, sender: str = "", body: typed_frames.Received = None
) -> Envelope | Later | None:
    """Validate, run and wrap one request in a reply envelope (``None`` for casts).

    ``body``: what :func:`typed_frames.decode_request` made of the frame's body (its model, validated with the
    envelope in one pass, or the ``BadRequest`` to answer with); ``None`` validates it here.

    A handler that returns a :class:`Later` (a deferred reply) gets back a ``Later`` of the reply envelope,
    completed on the thread that completes the handler's. Errors map to codes the same way everywhere.
    An envelope with ``trace`` runs under that trace context (a server span when tracing is on).
    """
    if env.trace is not None:
        return _traced(service, env, sender, body, reply_envelope)
    return dispatch_untraced(service, env, sender, body, reply_envelope)


def dispatch_wire(
    service: Service, env: Envelope, *, sender: str = "", body: typed_frames.Received = None
) -> dict[str, Any] | Later | None:
    """:func:`dispatch_later` with the reply as the map its frame is packed from (``codec.encode_wire``):
    what ``wire_map`` of the reply envelope gives, built straight from the request's fields (the bus)."""
    if env.trace is not None:
        return _traced(service, env, sender, body, reply_wire)
    return dispatch_untraced(service, env, sender, body, reply_wire)


def _traced(
    service: Service, env: Envelope, sender: str, body: typed_frames.Received, make: ReplyMaker
) -> Reply | Later | None:
    spans.note_received()
    if env.type in spans.QUIET_TYPES:
        with spans.use(env.trace):
            return dispatch_untraced(service, env, sender, body, make)
    attrs = {"rpc.system": "geode", "rpc.method": env.type, "geode.from": env.sender}
    with spans.span(env.type, attrs, parent=env.trace, kind="server") as sp:
        out = dispatch_untraced(service, env, sender, body, make)
        if isinstance(out, Envelope) and out.kind == "error":
            sp.fail(str(out.body.get("code", "error")))
        elif isinstance(out, dict) and out["kind"] == "error":
            sp.fail(str(out["body"].get("code", "error")))
        return out


def dispatch_untraced(
    service: Service, env: Envelope, sender: str, received: typed_frames.Received, make: ReplyMaker
) -> Reply | Later | None:
    """:func:`dispatch_later` / :func:`dispatch_wire` (``make``: ``reply_envelope`` / ``reply_wire``) of an
    envelope without ``trace`` (the bus calls it so for most requests: one call fewer)."""
    try:
        if received is None:
            body = catalog.parse_body(env.type, env.body)
        elif isinstance(received, BaseModel):
            body = received
        else:
            raise received
        deadline = env.deadline  # (env.expired() without its two calls: every served request)
        if deadline is not None and time.time_ns() // 1_000_000 > deadline:
            raise GeodeError("deadline passed before handling", code=ErrorCode.TIMEOUT)
        out = service.handle(Request(env, body))
    except Exception as exc:
        return _settle(env, False, exc, sender, make)
    if isinstance(out, Later):
        if env.kind == "cast":
            return None
        return Settled(out, partial(_settle, env, sender=sender, make=make))  # (one Later, not two)
    if env.kind == "request":  # an ok reply (_settle's first branch without its call; a map: no dump call)
        try:
            return make(env, "ok", out if out.__class__ is dict else catalog.dump(out), sender)
        except Exception as exc:
            return _settle(env, False, exc, sender, make)
    return _settle(env, True, out, sender, make)


def dispatch(
    service: Service, env: Envelope, *, sender: str = "", body: typed_frames.Received = None
) -> Envelope | None:
    """:func:`dispatch_later`, waiting for a deferred reply (up to the request's deadline).

    Used by :class:`LocalTransport` and any caller that cannot take a deferred reply."""
    out = dispatch_later(service, env, sender=sender, body=body)
    if not isinstance(out, Later):
        return out
    left_s = (env.deadline - now_ms()) / 1000 if env.deadline is not None else DEFERRED_CAP_S
    try:
        reply: Envelope = out.result(left_s)
    except RequestTimeout:
        out.drop()
        return env.reply_error(ErrorCode.TIMEOUT.value, "deferred reply not completed in time", sender=sender)
    return reply


def _settle(
    env: Envelope, ok: bool, value: Any, sender: str, make: ReplyMaker = reply_envelope
) -> Reply | None:
    """The reply for a handler's outcome: its value, or its exception mapped to an error code."""
    if env.kind == "cast":
        if not ok and not isinstance(value, GeodeError):
            logging.getLogger(__name__).error("handler for %s failed", env.type, exc_info=value)
        return None
    if ok:
        try:
            return make(env, "ok", catalog.dump(value), sender)
        except Exception as exc:
            ok, value = False, exc
    if isinstance(value, GeodeError):
        return make(env, "error", _error_body(value.code.value, value.message), sender)
    # a bug in a handler: an `internal` reply, the actor lives on
    logging.getLogger(__name__).error("handler for %s failed", env.type, exc_info=value)
    return make(
        env, "error", _error_body(ErrorCode.INTERNAL.value, f"{type(value).__name__}: {value}"[:500]), sender
    )


def _error_body(code: str, message: str) -> dict[str, Any]:
    return {"code": code, "message": message[:2048]}  # (as Envelope.reply_error)


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
        env, received = typed_frames.decode_request(codec.encode(env))
        reply = dispatch(self._service(target), env, sender=target, body=received)
        assert reply is not None
        return unwrap(codec.decode(codec.encode(reply)))

    def cast(self, target, type_, body=None, *, session=None):  # type: ignore[no-untyped-def]
        env = Envelope(
            kind="cast", type=type_, body=catalog.dump(body), session=session, **{"from": self._sender}
        )
        env, received = typed_frames.decode_request(codec.encode(env))
        self.cast_log.append(env)
        if self.on_cast is not None:
            self.on_cast(target, env)
        if target in self._services:
            dispatch(self._services[target], env, sender=target, body=received)
