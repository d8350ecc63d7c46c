"""A process's resident (RSS) and proportional (PSS) memory, read from ``/proc/<pid>/smaps_rollup``.

PSS divides each shared page among the processes mapping it, so the PSS of a tree adds up to what it really
costs; RSS counts a shared page once in every process. Linux only: elsewhere every figure is None.
"""

from __future__ import annotations

from pathlib import Path

from geode.protocol.runtime import ChildInfo, ProcessMemory, TreeMemory

PROC = Path("/proc")


def rollup(pid: int) -> dict[str, int] | None:
    """Every ``smaps_rollup`` field in bytes (``Rss``, ``Pss``, ``Pss_Anon``, ``Private_Dirty``, ...), or None
    when the process is gone, not ours, or the kernel has no ``smaps_rollup``."""
    try:
        text = (PROC / str(pid) / "smaps_rollup").read_text()
    except (OSError, ValueError):
        return None
    out: dict[str, int] = {}
    for line in text.splitlines():
        key, sep, rest = line.partition(":")
        parts = rest.split()
        if sep and len(parts) == 2 and parts[1] == "kB" and parts[0].isdigit():
            out[key] = int(parts[0]) * 1024
    return out if "Rss" in out and "Pss" in out else None


def memory(pid: int | None) -> ProcessMemory | None:
    """``pid``'s RSS and PSS, or None (no pid, gone, unreadable)."""
    if pid is None:
        return None
    fields = rollup(pid)
    if fields is None:
        return None
    return ProcessMemory(pid=pid, rss_bytes=fields["Rss"], pss_bytes=fields["Pss"])


def with_memory(child: ChildInfo, mem: ProcessMemory | None) -> ChildInfo:
    if mem is None:
        return child
    return child.model_copy(update={"rss_bytes": mem.rss_bytes, "pss_bytes": mem.pss_bytes})


def total(processes: list[ProcessMemory | None]) -> TreeMemory | None:
    """The sum over distinct pids (single-process mode lists one pid for every child); None if none read."""
    seen = {m.pid: m for m in processes if m is not None}
    if not seen:
        return None
    return TreeMemory(
        rss_bytes=sum(m.rss_bytes for m in seen.values()),
        pss_bytes=sum(m.pss_bytes for m in seen.values()),
        processes=len(seen),
    )
