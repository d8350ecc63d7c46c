"""Spans and the current trace context, cheap when tracing is off (one shared no-op span, no import).

The trace context is a W3C ``traceparent`` string in a context variable: the bus puts it on outgoing
envelopes (``Envelope.trace``) and sets it from an incoming one around its handler (``protocol.transport``),
so a span made anywhere in a handler or a turn's thread is a child of the sender's span. A span is made only
under a parent (or with ``root=True`` at an entry path): a process never starts a stray trace of its own."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from contextvars import ContextVar
from typing import Any, Protocol

TRACEPARENT = re.compile(r"^00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$")
TRACEPARENT_PATTERN = TRACEPARENT.pattern

# traced messages handled without a server span of their own (per stream delta, liveness): their context
# still applies, so what their handler sends stays in the trace
QUIET_TYPES = frozenset(
    {
        "turn.event",
        "turn.events",
        "origin.event",
        "origin.events",
        "worker.heartbeat",
        "executor.heartbeat",
        "runtime.ping",
        "runtime.status",
    }
)

_current: ContextVar[str | None] = ContextVar("geode_traceparent", default=None)


class Span(Protocol):
    """What a caller may do with a span (live or no-op)."""

    traceparent: str | None

    def __enter__(self) -> Span: ...
    def __exit__(self, exc_type: object, exc: object, tb: object) -> None: ...
    def set(self, key: str, value: Any) -> None: ...
    def fail(self, message: str) -> None: ...
    def end(self) -> None: ...


class _Noop:
    """The one span of an untraced process or an unparented call: every method does nothing."""

    __slots__ = ()
    traceparent: str | None = None

    def __enter__(self) -> _Noop:
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        return None

    def set(self, key: str, value: Any) -> None:
        return None

    def fail(self, message: str) -> None:
        return None

    def end(self) -> None:
        return None


NOOP = _Noop()


class Backend(Protocol):
    """The exporting half (``geode.telemetry.export.Exporting``), installed by :func:`install`."""

    include_content: bool

    def start(
        self,
        name: str,
        parent: str | None,
        attrs: dict[str, Any] | None,
        *,
        kind: str,
        start_ns: int | None,
        link: str | None,
    ) -> Span: ...

    def dropped(self) -> int: ...


class _State:
    backend: Backend | None = None
    received: int = 0  # envelopes that arrived with ``trace`` (a child's stop line reports it)


_state = _State()


def install(backend: Backend | None) -> None:
    """Turn tracing on in this process (``None``: off again, e.g. a test)."""
    _state.backend = backend


def enabled() -> bool:
    return _state.backend is not None


def current() -> str | None:
    """The traceparent of the span running on this thread (``None`` when untraced)."""
    return _current.get()


def trace_id(traceparent: str | None) -> str | None:
    return traceparent[3:35] if traceparent else None


def span(
    name: str,
    attrs: dict[str, Any] | None = None,
    *,
    parent: str | None = None,
    root: bool = False,
    kind: str = "internal",
    start_ns: int | None = None,
    link: str | None = None,
) -> Span:
    """A span named ``name`` under ``parent`` (default: the current context); the shared no-op when tracing
    is off, or when there is no parent and this is not an entry path (``root``). Use it as a context
    manager (it is the current context inside), or call :meth:`Span.end` for a span that ends elsewhere."""
    backend = _state.backend
    if backend is None:
        return NOOP
    if parent is None:
        parent = _current.get()
    if parent is None and not root:
        return NOOP
    return backend.start(name, parent, attrs, kind=kind, start_ns=start_ns, link=link)


def use(traceparent: str | None) -> AbstractContextManager[None]:
    """Run the block under ``traceparent`` (an envelope's or a turn record's); the one shared null context
    (nothing made) when it is ``None`` or tracing is off."""
    if traceparent is None or _state.backend is None:
        return _NULL
    return _under(traceparent)


_NULL: AbstractContextManager[None] = nullcontext()


@contextmanager
def _under(traceparent: str) -> Iterator[None]:
    token = _current.set(traceparent)
    try:
        yield
    finally:
        _current.reset(token)


def outgoing() -> str | None:
    """The ``trace`` an envelope sent now carries (``None`` when untraced or off)."""
    return _current.get() if _state.backend is not None else None


def note_received() -> None:
    _state.received += 1


def received() -> int:
    return _state.received


def content(value: Any) -> str | None:
    """A payload for a span attribute: ``None`` unless ``include_content``, else redacted and bounded."""
    backend = _state.backend
    if backend is None or not backend.include_content:
        return None
    from geode.redaction import redact_text

    return redact_text(value if isinstance(value, str) else repr(value), 4096)


def dropped() -> int:
    backend = _state.backend
    return backend.dropped() if backend is not None else 0
