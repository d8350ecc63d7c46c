"""CPU per thread of a process, from ``/proc/<pid>/task/*/stat``: which of a child's threads spends a write's
CPU (``store_commit.py`` prints the store child's busiest threads beside its CPU per write). Linux only; the
kernel knows a Python thread by its ``comm`` ("python" unless named), so threads are told apart by their id
(ids grow in the order the threads started)."""

from __future__ import annotations

import os
from pathlib import Path

TICK = os.sysconf("SC_CLK_TCK")


def thread_cpu(pid: int) -> dict[int, tuple[str, float]]:
    """``{tid: (comm, user+kernel CPU seconds)}`` of every thread of ``pid`` now (a vanished one left out)."""
    out: dict[int, tuple[str, float]] = {}
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            raw = Path(f"/proc/{pid}/task/{task}/stat").read_text()
        except OSError:
            continue
        head, _, rest = raw.rpartition(")")
        fields = rest.split()
        out[int(task)] = (head.split("(", 1)[1], (int(fields[11]) + int(fields[12])) / TICK)
    return out


def busiest(before: dict[int, tuple[str, float]], after: dict[int, tuple[str, float]], per: float) -> str:
    """The threads that spent CPU between two samples, busiest first, as ``comm/tid µs`` per ``per`` units."""
    spent = []
    for tid, (comm, cpu) in after.items():
        used = cpu - before.get(tid, (comm, 0.0))[1]
        if used > 0:
            spent.append((used, f"{comm}/{tid}"))
    spent.sort(reverse=True)
    return ", ".join(f"{name} {used / per * 1e6:.0f}" for used, name in spent[:4]) or "-"
