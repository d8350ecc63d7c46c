"""Opt-in heap tracing of a child (``GEODE_TRACEMALLOC``): on SIGUSR2 and at exit, log what grew and where.

``GEODE_TRACEMALLOC=1`` (every child) or ``=executor,store`` (those children). ``GEODE_TRACEMALLOC_FRAMES``
sets tracemalloc's traceback depth (default 8; 0: no tracemalloc, only the cheap native and object counts).
The first dump is the baseline; each later one logs the growth since it: glibc malloc (in use / free /
mmapped), threads, live objects by type, and, with tracemalloc, the top allocation sites. Diagnostics only.
Its first line says whether the child's paths keep their parts for good (3.12's pathlib interning,
``path_parts.py``): "path parts mortal" in a served child's log is the patch in place where it runs.
"""

from __future__ import annotations

import atexit
import ctypes
import gc
import logging
import os
import signal
import sys
import threading
import tracemalloc
from collections import Counter
from typing import Any

ENV = "GEODE_TRACEMALLOC"
TOP = 25
log = logging.getLogger(__name__)


class _MallInfo2(ctypes.Structure):
    _fields_ = [
        (n, ctypes.c_size_t)
        for n in (
            "arena",
            "ordblks",
            "smblks",
            "hblks",
            "hblkhd",
            "usmblks",
            "fsmblks",
            "uordblks",
            "fordblks",
            "keepcost",
        )
    ]


def wanted(name: str, spec: str | None = None) -> bool:
    """Whether ``GEODE_TRACEMALLOC`` (or ``spec``) names this child ("1"/"all": every child)."""
    spec = os.environ.get(ENV, "") if spec is None else spec
    names = {s.strip() for s in spec.split(",") if s.strip()}
    return bool(names & {"1", "all"}) or name in names


def native() -> dict[str, int]:
    """glibc's view (bytes): in use, free inside its arenas, mmapped chunks; plus RssAnon and threads."""
    out: dict[str, int] = {"threads": threading.active_count()}
    try:
        mi = ctypes.CDLL(None).mallinfo2
        mi.restype = _MallInfo2
        m = mi()
        out.update(malloc_in_use=m.uordblks, malloc_free=m.fordblks, malloc_mmapped=m.hblkhd)
    except (AttributeError, OSError):  # not glibc
        pass
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("RssAnon:"):
                    out["rss_anon"] = int(line.split()[1]) * 1024
    except OSError:
        pass
    return out


def object_counts() -> Counter[str]:
    return Counter(type(o).__qualname__ for o in gc.get_objects())


class HeapTrace:
    """Baselines and the growth since them (thread-safe: the signal handler and atexit)."""

    def __init__(self, name: str, *, tracing: bool) -> None:
        self.name = name
        self.tracing = tracing
        self._base: tuple[dict[str, int], Counter[str], Any] | None = None
        self._mu = threading.Lock()

    def dump(self) -> list[str]:
        with self._mu:
            now = (native(), object_counts(), self._snapshot())
            if self._base is None:
                self._base = now
                lines = [f"heap baseline of {self.name}: {_fmt(now[0])}"]
            else:
                lines = self._diff(*now)
        for line in lines:
            log.warning("%s", line)
        return lines

    def _snapshot(self) -> tracemalloc.Snapshot | None:
        if not self.tracing:
            return None
        return tracemalloc.take_snapshot().filter_traces(
            [
                tracemalloc.Filter(False, tracemalloc.__file__),
                tracemalloc.Filter(False, "<frozen importlib._bootstrap>"),
                tracemalloc.Filter(False, "<frozen importlib._bootstrap_external>"),
            ]
        )

    def _diff(self, nat: dict[str, int], objs: Counter[str], snap: Any) -> list[str]:
        assert self._base is not None
        nat0, objs0, snap0 = self._base
        delta = {k: v - nat0.get(k, 0) for k, v in nat.items()}
        out = [f"heap of {self.name} now: {_fmt(nat)}", f"  growth since the baseline: {_fmt(delta)}"]
        grew = Counter({k: objs[k] - objs0.get(k, 0) for k in objs})
        out.append(
            "  live objects grown: " + ", ".join(f"{k} {n:+d}" for k, n in grew.most_common(12) if n > 0)
        )
        if snap is None or snap0 is None:
            return out
        size, _peak = tracemalloc.get_traced_memory()
        out.append(f"  tracemalloc: {size / 2**20:.1f} MiB traced now; top growth by line:")
        for st in snap.compare_to(snap0, "lineno")[:TOP]:
            out.append(f"  {st.size_diff / 1024:+10.1f} KiB {st.count_diff:+8d} blocks  {st.traceback[0]}")
        out.append("  top growth by traceback:")
        for st in snap.compare_to(snap0, "traceback")[:5]:
            out.append(f"  {st.size_diff / 1024:+10.1f} KiB {st.count_diff:+8d} blocks")
            out.extend(f"      {line}" for line in st.traceback.format(limit=12))
        return out


def _fmt(d: dict[str, int]) -> str:
    parts = (f"threads {v:+d}" if k == "threads" else f"{k} {v / 2**20:+.2f} MiB" for k, v in d.items())
    return ", ".join(parts)


def arm(name: str) -> HeapTrace | None:
    """Start tracing when ``GEODE_TRACEMALLOC`` names this child; SIGUSR2 (and exit) dump."""
    if not wanted(name):
        return None
    frames = int(os.environ.get(f"{ENV}_FRAMES", "8"))
    if frames > 0:
        tracemalloc.start(frames)
    trace = HeapTrace(name, tracing=frames > 0)
    signal.signal(signal.SIGUSR2, lambda *_: trace.dump())
    atexit.register(trace.dump)
    # the two notes, seen from the child itself: its pathlib patch (path_parts.py), and whether the code it
    # was forked with came immortal (immortal.py: the bus's code, imported before every fork)
    from actors.bus.socket_thread import Bus
    from actors.tree.path_parts import IMMORTAL_REFCOUNT, immortal_parts

    code = "immortal" if sys.getrefcount(Bus.start.__code__) >= IMMORTAL_REFCOUNT else "mortal"
    log.warning(
        "heap tracing on (%s, %d frames; path parts %s; code %s); SIGUSR2 dumps the growth since the first "
        "dump",
        ENV,
        frames,
        "immortal" if immortal_parts() else "mortal",
        code,
    )
    return trace
