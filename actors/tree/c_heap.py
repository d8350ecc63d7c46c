"""A child's C heap (glibc malloc): one arena, and freed memory given back to the OS every few seconds.

glibc gives threads their own arenas (up to 8 per core) and keeps what they free. The executor starts threads
per call (a handler thread and two pipe readers per run_bash), so its RSS grew ~5 MiB per 1,000 turns with
memory that was free but held in the arenas (``mallinfo2``: in use flat, free growing; Python objects flat
under tracemalloc). One arena and a periodic ``malloc_trim(0)`` make that ~0.6 MiB (docs/benchmarks.md, Soak).
Python allocates under the GIL, so one arena costs no contention. The trimming thread is the child's one
housekeeping thread: it also runs the supervisor-death check (``child_guard.parent_check``) every 0.5 s, which
had a thread of its own in every child (18-66 KiB a thread, session 8). Knobs: ``GEODE_MALLOC_ARENAS``
(default 1; 0 = glibc's default; an explicit ``MALLOC_ARENA_MAX`` wins) and ``GEODE_MALLOC_TRIM_S`` (default
10; 0 = off: the supervisor-death check still runs).
"""

from __future__ import annotations

import ctypes
import logging
import os
import threading
import time
from collections.abc import Callable

log = logging.getLogger(__name__)
M_ARENA_MAX = -8  # mallopt parameter (malloc.h)
ARENAS, TRIM_EVERY_S, TICK_S = 1, 10.0, 0.5


def _libc() -> ctypes.CDLL | None:
    try:
        libc = ctypes.CDLL(None)
        libc.mallopt, libc.malloc_trim  # noqa: B018 - glibc only (not musl, not macOS)
    except (AttributeError, OSError):
        return None
    return libc


def limit_arenas(n: int | None = None) -> bool:
    """Cap glibc's arenas (call before the process starts threads). False when not glibc or left alone."""
    n = int(os.environ.get("GEODE_MALLOC_ARENAS", ARENAS)) if n is None else n
    libc = _libc()
    if libc is None or n <= 0 or "MALLOC_ARENA_MAX" in os.environ:
        return False
    return bool(libc.mallopt(ctypes.c_int(M_ARENA_MAX), ctypes.c_int(n)))


def _glibc_trim() -> Callable[[], int] | None:
    libc = _libc()
    if libc is None:
        return None
    fn = libc.malloc_trim
    fn.argtypes = [ctypes.c_size_t]
    fn.restype = ctypes.c_int
    return lambda: int(fn(0))


class MallocTrimmer:
    """A daemon thread trimming the C heap every ``every_s`` seconds (a few ms on a child's heap); with a
    ``tick`` (the supervisor-death check, ``child_guard.parent_check``) the same thread also runs it every
    ``tick_s`` (one housekeeping thread per child, not two)."""

    def __init__(
        self,
        every_s: float | None = None,
        trim: Callable[[], int] | None = None,
        tick: Callable[[], None] | None = None,
        tick_s: float = TICK_S,
    ) -> None:
        env = os.environ.get("GEODE_MALLOC_TRIM_S")
        self.every_s = every_s if every_s is not None else float(env) if env else TRIM_EVERY_S
        self._trim = trim if trim is not None else _glibc_trim()
        self._tick, self.tick_s = tick, tick_s
        self._stop = threading.Event()
        self.trims = 0
        self._thread: threading.Thread | None = None

    def trim_now(self) -> bool:
        """Trim once; False where there is no glibc."""
        if self._trim is None:
            return False
        self._trim()
        self.trims += 1
        return True

    def _trimming(self) -> bool:
        return self._trim is not None and self.every_s > 0

    def start(self) -> MallocTrimmer:
        if self._thread is None and (self._trimming() or self._tick is not None):
            self._thread = threading.Thread(target=self._run, name="housekeeping", daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()

    def _run(self) -> None:
        tick, trimming = self._tick, self._trimming()
        if tick is None:
            wait_s = self.every_s
        else:
            wait_s = min(self.tick_s, self.every_s) if trimming else self.tick_s
        next_trim = time.monotonic() + self.every_s
        while not self._stop.wait(wait_s):
            if tick is not None:
                tick()  # the parent check: exits the process when the supervisor is gone
            if not trimming or time.monotonic() < next_trim:
                continue
            next_trim = time.monotonic() + self.every_s
            try:
                self.trim_now()
            except Exception:  # housekeeping never takes the child down
                log.exception("malloc_trim failed")


def configure(tick: Callable[[], None] | None = None) -> MallocTrimmer:
    """At a child's start, before its threads: one arena, then the housekeeping thread (trims; runs
    ``tick`` every half second: the supervisor-death check)."""
    limit_arenas()
    return MallocTrimmer(tick=tick).start()
