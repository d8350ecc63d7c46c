"""Soak sampling: RSS and open fds of every process of the tree (the supervisor and its descendants)."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

PAGE = os.sysconf("SC_PAGE_SIZE")


def _children_of() -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {}
    for e in os.scandir("/proc"):
        if not e.name.isdigit():
            continue
        try:
            stat = Path(f"/proc/{e.name}/stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        kids.setdefault(ppid, []).append(int(e.name))
    return kids


def tree_pids(root: int) -> list[int]:
    kids, out, todo = _children_of(), [], [root]
    while todo:
        p = todo.pop()
        out.append(p)
        todo += kids.get(p, [])
    return out


def _name(pid: int) -> str | None:
    try:
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return None
    words = [w.decode(errors="replace") for w in cmd if w]
    if "actors.tree.child_main" in words and words.index("actors.tree.child_main") + 1 < len(words):
        return words[words.index("actors.tree.child_main") + 1]
    return None


def _rss_anon(pid: int) -> int:
    """Anonymous resident bytes (the heap; the store's LMDB map is file-backed and grows with the data)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("RssAnon:"):
            return int(line.split()[1]) * 1024
    return 0


def sample(root: int) -> dict[str, tuple[int, int, int]]:
    """name -> (RSS bytes, anonymous RSS bytes, open fds) of the supervisor ``root`` and every child of the
    tree under it (the short-lived processes the tools spawn are left out)."""
    out: dict[str, tuple[int, int, int]] = {}
    for pid in tree_pids(root):
        name = "supervisor" if pid == root else _name(pid)
        if name is None:
            continue
        try:
            rss = int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * PAGE
            fds = len(os.listdir(f"/proc/{pid}/fd"))
            anon = _rss_anon(pid)
        except OSError:
            continue
        out[name if name not in out else f"{name}:{pid}"] = (rss, anon, fds)
    return out


@dataclass
class SoakSampler:
    root: int
    turns: Callable[[], int]
    every_s: float = 3.0
    rows: list[tuple[float, int, dict[str, tuple[int, int, int]]]] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        while not self._stop.is_set():
            self.rows.append((time.monotonic(), self.turns(), sample(self.root)))
            self._stop.wait(self.every_s)

    def stop(self) -> None:
        self._stop.set()

    def growth(self, warmup_turns: int) -> list[str]:
        """Per process: RSS and fds at the first sample after ``warmup_turns`` and at the end, and the
        growth per 1,000 turns between them."""
        rows = [r for r in self.rows if r[1] >= warmup_turns] or self.rows
        if len(rows) < 2:
            return ["soak: too few samples"]
        (_, n0, s0), (_, n1, s1) = rows[0], rows[-1]
        per = 1000 / max(1, n1 - n0)
        out = [
            f"{'process':<12} {'RSS MB start':>12} {'end':>7} {'/1k turns':>9} "
            f"{'anon MB start':>13} {'end':>7} {'/1k turns':>9} {'fds start':>9} {'end':>4} {'/1k':>5}"
        ]
        for name in sorted(set(s0) & set(s1)):
            (r0, a0, f0), (r1, a1, f1) = s0[name], s1[name]
            out.append(
                f"{name:<12} {r0 / 2**20:>12.1f} {r1 / 2**20:>7.1f} {(r1 - r0) / 2**20 * per:>+9.2f} "
                f"{a0 / 2**20:>13.1f} {a1 / 2**20:>7.1f} {(a1 - a0) / 2**20 * per:>+9.2f} "
                f"{f0:>9} {f1:>4} {(f1 - f0) * per:>+5.1f}"
            )
        gone = sorted(set(s0) ^ set(s1))
        if gone:
            out.append(f"(processes present at only one end: {', '.join(gone)})")
        out.append(f"measured over turns {n0}..{n1} ({n1 - n0} turns)")
        return out
