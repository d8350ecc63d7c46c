"""Stable error codes and the exception families every process shares.

A request gets exactly one terminal reply: ``ok`` with a body or ``error`` with one of the codes below.
"""

from __future__ import annotations

from enum import StrEnum


class ErrorCode(StrEnum):
    """Stable, documented error codes carried by ``error`` replies."""

    BAD_REQUEST = "bad_request"  # malformed, oversized or unknown message; invalid body
    NOT_FOUND = "not_found"  # the addressed record, session or child does not exist
    TIMEOUT = "timeout"  # the deadline passed before a reply
    UNAVAILABLE = "unavailable"  # the peer or a resource (disk, map, store) cannot serve now
    OVERLOADED = "overloaded"  # a bounded queue is full; retry later
    INTERNAL = "internal"  # a handler raised unexpectedly; the actor stays alive
    CONFLICT = "conflict"  # an idempotency key was reused with different content
    NOT_READY = "not_ready"  # the peer has not completed its handshake or start-up


class GeodeError(Exception):
    """Base of every error GEODE raises on purpose. ``code`` travels on the wire."""

    code: ErrorCode = ErrorCode.INTERNAL

    def __init__(self, message: str = "", *, code: ErrorCode | None = None) -> None:
        super().__init__(message)
        if code is not None:
            self.code = code
        self.message = message

    def __str__(self) -> str:
        return f"{self.code.value}: {self.message}" if self.message else self.code.value


class ConfigError(GeodeError):
    """Misuse or bad configuration; the message names the fix."""

    code = ErrorCode.BAD_REQUEST


class BadRequest(GeodeError):
    """A frame or body that cannot be accepted."""

    code = ErrorCode.BAD_REQUEST


class NotFound(GeodeError):
    code = ErrorCode.NOT_FOUND


class Unavailable(GeodeError):
    code = ErrorCode.UNAVAILABLE


class Overloaded(GeodeError):
    code = ErrorCode.OVERLOADED


class Conflict(GeodeError):
    code = ErrorCode.CONFLICT


class NotReady(GeodeError):
    code = ErrorCode.NOT_READY


class RequestTimeout(GeodeError):
    """No reply arrived before the deadline (the peer may be gone, or still working)."""

    code = ErrorCode.TIMEOUT


class RemoteError(GeodeError):
    """An ``error`` reply received from a peer, re-raised in the caller."""


_BY_CODE: dict[ErrorCode, type[GeodeError]] = {
    ErrorCode.BAD_REQUEST: BadRequest,
    ErrorCode.NOT_FOUND: NotFound,
    ErrorCode.UNAVAILABLE: Unavailable,
    ErrorCode.OVERLOADED: Overloaded,
    ErrorCode.CONFLICT: Conflict,
    ErrorCode.NOT_READY: NotReady,
    ErrorCode.TIMEOUT: RequestTimeout,
}


def error_from_reply(code: str, message: str) -> GeodeError:
    """Turn an ``error`` reply back into the matching exception class (unknown codes → RemoteError)."""
    try:
        ec = ErrorCode(code)
    except ValueError:
        return RemoteError(f"[{code}] {message}", code=ErrorCode.INTERNAL)
    cls = _BY_CODE.get(ec, RemoteError)
    return cls(message, code=ec)
