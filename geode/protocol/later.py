"""A deferred reply: a handler returns a :class:`Later` and completes it from another thread (docs/runtime.md,
"Deferred replies"), so no handler thread is parked while, e.g., the store's writer commits."""

from __future__ import annotations

import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

from geode.protocol.errors import RequestTimeout

Outcome = Callable[[bool, Any], None]  # (ok, value or exception)


class _Unheld:
    """The :data:`answering` block when no transport installed one: nothing held."""

    __slots__ = ()

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


# A block in which this thread completes several Laters in a row (the store writer's answers to one group
# commit): the transport may hold the replies their completions send and send them together as the block
# ends (one lock, one ZeroMQ message per peer) instead of one by one; nothing is held past it. Called as
# ``later.answering()`` (a module attribute: :func:`set_answering` replaces it; actors/bus/reply_outbox.py).
answering: Callable[[], AbstractContextManager[object]] = _Unheld


def set_answering(block: Callable[[], AbstractContextManager[object]]) -> None:
    """Install the transport's :data:`answering` block (``actors.bus.reply_outbox`` does at import)."""
    global answering
    answering = block


class Later:
    """Completed once, from any thread, by :meth:`resolve` or :meth:`fail`; later completions are ignored.

    One consumer registers with :meth:`then` (called on the completing thread, or at once if already done);
    :meth:`result` blocks for it instead; :meth:`drop` forgets the consumer (the reply is not wanted)."""

    __slots__ = ("_callback", "_done", "_mu", "_outcome")

    def __init__(self) -> None:
        self._mu = threading.Lock()
        self._done = threading.Lock()  # held until completed: result() waits on it (one futex)
        self._done.acquire()
        self._outcome: tuple[bool, Any] | None = None
        self._callback: Outcome | None = None

    @classmethod
    def resolved(cls, value: Any) -> Later:
        later = cls()
        later.resolve(value)
        return later

    def resolve(self, value: Any) -> None:
        with self._mu:  # _complete(True, value) without its call (every deferred reply, twice)
            if self._outcome is not None:
                return
            self._outcome = (True, value)
            callback, self._callback = self._callback, None
        self._done.release()
        if callback is not None:
            callback(True, value)

    def fail(self, exc: BaseException) -> None:
        self._complete(False, exc)

    def done(self) -> bool:
        return self._outcome is not None

    def then(self, callback: Outcome) -> None:
        with self._mu:
            outcome = self._outcome
            if outcome is None:
                if self._callback is not None:
                    raise RuntimeError("a Later has one consumer: then() was already called")
                self._callback = callback
                return
        callback(*outcome)

    def map(self, fn: Callable[[Any], Any]) -> Later:
        """A Later of ``fn(value)`` (an exception from ``fn`` fails it); failures pass through."""
        out = Later()

        def settle(ok: bool, value: Any) -> None:
            if not ok:
                out.fail(value)
                return
            try:
                mapped = fn(value)
            except Exception as exc:
                out.fail(exc)
                return
            out.resolve(mapped)

        self.then(settle)
        return out

    def drop(self) -> None:
        """Nobody waits any more: forget the consumer so a late completion goes nowhere."""
        with self._mu:
            self._callback = None

    def result(self, timeout_s: float) -> Any:
        """The value (or raise the failure); ``RequestTimeout`` when not completed within ``timeout_s``."""
        if not self._done.acquire(timeout=max(0.0, timeout_s)):
            raise RequestTimeout(f"deferred reply not completed within {timeout_s:g}s")
        self._done.release()  # stay completed for any later result() call
        assert self._outcome is not None
        ok, value = self._outcome
        if not ok:
            raise value
        return value

    def _complete(self, ok: bool, value: Any) -> None:
        with self._mu:
            if self._outcome is not None:
                return
            self._outcome = (ok, value)
            callback, self._callback = self._callback, None
        self._done.release()
        if callback is not None:
            callback(ok, value)


class Settled(Later):
    """The Later of ``fn(ok, value)`` of ``source``'s outcome, always ok: what a deferred handler's outcome
    settles into (the reply, ``geode.protocol.transport``). A view, with no lock or state of its own, so a
    deferred reply costs one ``Later``, not two: its one consumer (:meth:`then`) is the source's, ``fn`` runs
    on the completing thread as it passes the outcome on; :meth:`drop` drops it there; :meth:`result` waits
    for the source. Completed only through its source (:meth:`resolve` / :meth:`fail` raise)."""

    __slots__ = ("_fn", "_source")

    def __init__(
        self, source: Later, fn: Callable[[bool, Any], Any]
    ) -> None:  # (no Later.__init__: no locks)
        self._source = source
        self._fn = fn

    def then(self, callback: Outcome) -> None:
        fn = self._fn
        self._source.then(lambda ok, value: callback(True, fn(ok, value)))

    def done(self) -> bool:
        return self._source.done()

    def drop(self) -> None:
        self._source.drop()

    def result(self, timeout_s: float) -> Any:
        source = self._source
        if not source._done.acquire(timeout=max(0.0, timeout_s)):
            raise RequestTimeout(f"deferred reply not completed within {timeout_s:g}s")
        source._done.release()
        assert source._outcome is not None
        return self._fn(*source._outcome)

    def resolve(self, value: Any) -> None:
        raise TypeError("a Settled Later completes with its source")

    def fail(self, exc: BaseException) -> None:
        raise TypeError("a Settled Later completes with its source")
