"""Phase 3, call provider: one model call with classified failures and a bounded, cancellable retry."""

from __future__ import annotations

import contextvars
import threading
import time
from collections.abc import Callable
from functools import partial
from queue import Empty, SimpleQueue
from typing import Any

from geode.loop import tracing
from geode.loop.events import EventStream
from geode.loop.reused_threads import MODEL_CALLS
from geode.loop.settings import LoopSettings
from geode.loop.state import Terminal, TurnState
from geode.metrics import record as metrics
from geode.protocol.turns import TerminationReason, TurnEventKind
from geode.providers.setup_error import SetupError
from geode.providers.types import ModelRequest, ModelResponse, Provider, ProviderError, ProviderErrorKind

ACTION_KINDS = frozenset({ProviderErrorKind.AUTH, ProviderErrorKind.BAD_REQUEST, ProviderErrorKind.UNKNOWN})


class ContextOverflow(Exception):
    """The provider said the prompt does not fit; the caller may compact harder and retry."""


class _Cancelled(Exception):
    pass


DELTA_EVERY_S = 0.05  # streamed text goes out at most once per this interval (one event, joined deltas)


class _DeltaCoalescer:
    """Joins the provider's text deltas into one ``text_delta`` event per ``every_s``, so a fast stream does
    not flood the bus: the first delta goes out at once, later ones when the interval has passed (on the
    next delta or the caller's 50 ms tick), and whatever is left when the call ends."""

    def __init__(self, events: EventStream, every_s: float = DELTA_EVERY_S) -> None:
        self.events, self.every_s = events, every_s
        self._parts: list[str] = []
        self._last = 0.0
        self._lock = threading.Lock()
        self.on_hold: Callable[[], None] | None = None  # told when it starts holding text (the caller ticks)

    def add(self, text: str) -> None:
        with self._lock:
            held = bool(self._parts)
            self._parts.append(text)
            if time.monotonic() - self._last >= self.every_s:
                self._flush_locked()
            elif not held and self.on_hold is not None:
                self.on_hold()

    def holding(self) -> bool:
        return bool(self._parts)

    def tick(self) -> None:
        with self._lock:
            if self._parts and time.monotonic() - self._last >= self.every_s:
                self._flush_locked()

    def flush(self) -> None:
        with self._lock:
            self._flush_locked()

    def _flush_locked(self) -> None:
        if self._parts:
            text, self._parts = "".join(self._parts), []
            self.events.emit(TurnEventKind.TEXT_DELTA, text=text)
        self._last = time.monotonic()


def call_model(
    provider: Provider,
    request: ModelRequest,
    state: TurnState,
    settings: LoopSettings,
    events: EventStream,
) -> ModelResponse:
    """Call the provider; retryable failures are retried ``llm_max_retries`` times, then the turn ends."""
    attempt = 0
    deltas = _DeltaCoalescer(events)

    def on_delta(text: str) -> None:
        if state.cancel.is_set():
            raise _Cancelled()
        if text:
            deltas.add(text)

    while True:
        state.check_cancel()
        started = time.monotonic()
        try:
            try:
                response = _interruptible(
                    lambda: tracing.complete(provider, request, on_delta if request.stream else None),
                    state.cancel,
                    tick=deltas.tick,
                    deltas=deltas,
                )
            finally:
                if not state.cancel.is_set():
                    deltas.flush()  # the rest of the streamed text, before whatever follows the call
            state.guards.consecutive_llm_failures = 0
            metrics.model_call(time.monotonic() - started, "ok")
            return response
        except _Cancelled:
            raise Terminal(
                TerminationReason.USER_CANCELLED, error="cancelled during the model call"
            ) from None
        except ProviderError as exc:
            metrics.model_call(time.monotonic() - started, "error")
            if state.cancel.is_set():
                raise Terminal(
                    TerminationReason.USER_CANCELLED, error="cancelled during the model call"
                ) from None
            state.guards.consecutive_llm_failures += 1
            if exc.kind == ProviderErrorKind.BILLING:
                raise Terminal(TerminationReason.BILLING_ERROR, error=_describe(exc)) from exc
            if exc.kind == ProviderErrorKind.CONTEXT_OVERFLOW:
                raise ContextOverflow(exc.message) from exc
            if not exc.retryable or exc.kind in ACTION_KINDS:
                raise Terminal(TerminationReason.MODEL_ACTION_REQUIRED, error=_describe(exc)) from exc
            attempt += 1
            wait = (
                exc.retry_after_s
                if exc.retry_after_s is not None
                else settings.retry_base_s * 2 ** (attempt - 1)
            )
            if attempt > settings.llm_max_retries or wait > settings.retry_max_wait_s:
                raise Terminal(TerminationReason.MODEL_ACTION_REQUIRED, error=_describe(exc)) from exc
            metrics.provider_retry(getattr(provider, "name", ""))
            events.emit(
                TurnEventKind.LLM_RETRY,
                attempt=attempt,
                error_kind=exc.kind.value,
                detail=exc.message[:300],
                message=retry_message(wait, exc.kind.value, attempt, settings.llm_max_retries),
            )
            events.emit(TurnEventKind.RETRY_WAIT, seconds=wait, attempt=attempt)
            if state.cancel.wait(wait):
                raise Terminal(
                    TerminationReason.USER_CANCELLED, error="cancelled while waiting to retry"
                ) from None


def _interruptible(
    fn: Callable[[], ModelResponse],
    cancel: threading.Event,
    *,
    tick: Callable[[], None] | None = None,
    deltas: _DeltaCoalescer | None = None,
) -> ModelResponse:
    """Run the model call on its own thread so a cancel ends the wait at once (the request is abandoned: a
    stream stops at its next delta, a plain request's answer is dropped when it arrives). The outcome comes
    back through a ``SimpleQueue`` (C-level put and timed get: no Condition built, notified and waited on
    per call, as an ``Event`` was).

    With a :class:`~geode.loop.state.CancelFlag` the wait blocks until the outcome, a cancel (the flag puts
    a wake into the queue) or streamed text held back (``deltas`` puts one: then ``tick`` every 50 ms while
    it holds text), not a wake every 50 ms for the whole call (20 a second per session waiting on its model);
    with a plain ``Event``, every 50 ms as before."""
    box: SimpleQueue[tuple[bool, Any] | None] = SimpleQueue()
    ctx = contextvars.copy_context()  # the turn's event stream and cancel flag (provider retry events)

    def target() -> None:
        try:
            out: tuple[bool, Any] = (True, ctx.run(fn))
        except BaseException as exc:  # re-raised on the caller's thread
            out = (False, exc)
        box.put(out)

    watch = getattr(cancel, "watch", None)
    wake = partial(box.put, None)
    unwatch = watch(wake) if watch is not None else None
    if unwatch is not None and deltas is not None:
        deltas.on_hold = wake
    try:
        MODEL_CALLS.run(target)  # a reused daemon thread (geode.loop.reused_threads)
        while True:
            timed = unwatch is None or (deltas is not None and deltas.holding())
            try:
                item = box.get(timeout=0.05) if timed else box.get()
            except Empty:
                item = None
            if item is not None:
                ok, value = item
                break
            if cancel.is_set():
                raise _Cancelled() from None
            if tick is not None:
                tick()  # streamed text held back by the coalescer goes out
    finally:
        if unwatch is not None:
            unwatch()
        if deltas is not None:
            deltas.on_hold = None
    if not ok:
        raise value
    return value  # type: ignore[no-any-return]


def retry_message(wait_s: float, kind: str, attempt: int, of: int) -> str:
    """The line the CLI shows for a retry: ``retrying in 1.2 s (connection error, attempt 1/3)``."""
    return f"retrying in {wait_s:.1f} s ({kind.replace('_', ' ')} error, attempt {attempt}/{of})"


def _describe(exc: ProviderError) -> str:
    if isinstance(exc, SetupError):  # already the whole one-line explanation
        return exc.message[:1000]
    text = f"{exc.kind.value}: {exc.message}"
    if exc.hint:
        text += f" ({exc.hint})"
    return text[:1000]
