"""Ctrl-C while the CLI follows a turn, taken where the follow loop looks for it rather than where it lands.

Python raises ``KeyboardInterrupt`` at whatever line the main thread runs when SIGINT arrives. In the follow
loop of :meth:`actors.cli.client.ControlClient.follow` most lines were guarded (the socket read, the events'
handling), but not all: one that landed in a re-attach, a catch-up, a ping or between a frame's read and its
queueing left ``geode ask --json`` with "geode: cancelled", exit 130 and no answer object (the turn was still
cancelled). While an :class:`InterruptLatch` is installed, SIGINT only sets a flag; the loop takes it at its
top (:meth:`InterruptLatch.take`) and cancels the turn as before, and a blocking question to a person (the
approval prompt) is run inside :meth:`InterruptLatch.raising`, where Ctrl-C raises at once as it always did.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import signal
else:  # the C module at run time: `signal` builds its enums at import (the ask path counts its modules)
    import _signal as signal


class InterruptLatch:
    """A SIGINT handler that latches instead of raising (outside :meth:`raising`)."""

    def __init__(self) -> None:
        self.pending = False
        self._raise = 0  # > 0: inside raising(): Ctrl-C raises KeyboardInterrupt at once
        self._depth = 0  # installed() blocks entered (only the outermost one sets and restores the handler)

    def _handler(self, signum: int, frame: FrameType | None) -> None:
        if self._raise:
            raise KeyboardInterrupt
        self.pending = True

    def take(self) -> bool:
        """Whether a Ctrl-C came since the last take (and forget it)."""
        if not self.pending:
            return False
        self.pending = False
        return True

    @contextmanager
    def installed(self) -> Iterator[InterruptLatch]:
        """Latch SIGINT for the block. Only where Python's own Ctrl-C handler is in place, in the main thread
        (an MCP host's worker thread, an ignored SIGINT, another handler: left as they are, and nothing is
        latched). The previous handler is back at the end; a Ctrl-C latched but not taken by then (the turn
        ended first) is dropped: the turn it would have cancelled is over."""
        main = threading.current_thread() is threading.main_thread()
        if self._depth and main:
            self._depth += 1
            try:
                yield self
            finally:
                self._depth -= 1
            return
        if not main or signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
            yield self
            return
        self.pending = False
        signal.signal(signal.SIGINT, self._handler)
        self._depth = 1
        try:
            yield self
        finally:
            self._depth = 0
            signal.signal(signal.SIGINT, signal.default_int_handler)
            self.pending = False

    @contextmanager
    def raising(self) -> Iterator[None]:
        """Ctrl-C raises ``KeyboardInterrupt`` at once inside the block (a blocking read of a person's
        answer); one latched just before it raises on entry."""
        if self.take():
            raise KeyboardInterrupt
        self._raise += 1
        try:
            yield
        finally:
            self._raise -= 1


LATCH = InterruptLatch()  # the process's one latch (SIGINT has one handler)
