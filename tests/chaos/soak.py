"""Soak sampling: RSS and open fds of every process of the tree (the supervisor and its descendants)."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from actors.tree.heap_trace import ENV, wanted

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
    # a child forked by the zygote has one space-separated title (setproctitle); an exec'd one, NUL-separated
    words = [w for part in cmd for w in part.decode(errors="replace").split()]
    if "actors.tree.zygote" in words:
        return "zygote"
    if "actors.tree.child_main" in words and words.index("actors.tree.child_main") + 1 < len(words):
        return words[words.index("actors.tree.child_main") + 1]
    return None


def _status_kib(pid: int, key: str, file: str = "status") -> int:
    for line in Path(f"/proc/{pid}/{file}").read_text().splitlines():
        if line.startswith(key):
            return int(line.split()[1]) * 1024
    return 0


def _rss_anon(pid: int) -> int:
    """Anonymous resident bytes (the heap; the store's LMDB map is file-backed and grows with the data)."""
    return _status_kib(pid, "RssAnon:")


def _pss(pid: int) -> int:
    """Proportional set size: shared pages (the interpreter, libraries) divided among the processes."""
    return _status_kib(pid, "Pss:", "smaps_rollup")


Row = tuple[int, int, int, int]  # RSS, anonymous RSS, PSS (bytes), open fds


def sample(root: int) -> dict[str, Row]:
    """name -> (RSS, anonymous RSS, PSS, open fds) of the supervisor ``root`` and every child of the tree
    under it (the short-lived processes the tools spawn are left out)."""
    out: dict[str, Row] = {}
    for pid in tree_pids(root):
        name = "supervisor" if pid == root else _name(pid)
        if name is None:
            continue
        try:
            rss = int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * PAGE
            fds = len(os.listdir(f"/proc/{pid}/fd"))
            anon, pss = _rss_anon(pid), _pss(pid)
        except OSError:
            continue
        out[name if name not in out else f"{name}:{pid}"] = (rss, anon, pss, fds)
    return out


@dataclass
class SoakSampler:
    root: int
    turns: Callable[[], int]
    every_s: float = 3.0
    rows: list[tuple[float, int, dict[str, Row]]] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        while not self._stop.is_set():
            self.rows.append((time.monotonic(), self.turns(), sample(self.root)))
            self._stop.wait(self.every_s)

    def stop(self) -> None:
        self._stop.set()

    def growth(self, warmup_turns: int) -> list[str]:
        """Per process: RSS, anonymous RSS, PSS and fds at the first sample after ``warmup_turns`` and at the
        end, and the growth per 1,000 turns between them; then the anonymous RSS every 1,000 turns."""
        rows = [r for r in self.rows if r[1] >= warmup_turns] or self.rows
        if len(rows) < 2:
            return ["soak: too few samples"]
        (_, n0, s0), (_, n1, s1) = rows[0], rows[-1]
        per = 1000 / max(1, n1 - n0)
        mib = 2**20
        out = [
            f"{'process':<12} {'RSS MiB':>14} {'/1k':>6} {'anon MiB':>14} {'/1k':>6} {'PSS MiB':>14} "
            f"{'/1k':>6} {'fds':>8} {'/1k':>5}"
        ]
        for name in sorted(set(s0) & set(s1)):
            cols = []
            for i in range(3):
                a, b = s0[name][i] / mib, s1[name][i] / mib
                cols.append(f"{f'{a:.1f} → {b:.1f}':>14} {(b - a) * per:>+6.2f}")
            f0, f1 = s0[name][3], s1[name][3]
            out.append(f"{name:<12} {' '.join(cols)} {f'{f0} → {f1}':>8} {(f1 - f0) * per:>+5.1f}")
        gone = sorted(set(s0) ^ set(s1))
        if gone:
            out.append(f"(processes present at only one end: {', '.join(gone)})")
        out.append(f"measured over turns {n0}..{n1} ({n1 - n0} turns)")
        out += self.trajectory()
        return out

    def trajectory(self, every: int = 1000) -> list[str]:
        """Anonymous RSS (MiB), then open fds, of each process at the first sample past every ``every`` turns:
        flat or levelling off means bounded, a steady climb means something keeps growing."""
        marks: list[tuple[int, dict[str, Row]]] = []
        for _, n, s in self.rows:
            if n >= every * (len(marks) + 1):
                marks.append((n, s))
        if not marks:
            return []
        names = sorted(set.intersection(*(set(s) for _, s in marks)))
        out = [f"anon MiB at turn {' '.join(f'{n:>6}' for n, _ in marks)}"]
        for name in names:
            out.append(f"  {name:<14} {' '.join(f'{s[name][1] / 2**20:>6.1f}' for _, s in marks)}")
        out.append(f"open fds at turn {' '.join(f'{n:>6}' for n, _ in marks)}")
        for name in names:
            out.append(f"  {name:<14} {' '.join(f'{s[name][3]:>6}' for _, s in marks)}")
        return out


class HeapDumps:
    """With ``GEODE_TRACEMALLOC`` set (actors/tree/heap_trace.py), SIGUSR2 to the traced children once past
    the warm-up (their baseline) and once shortly before the last turn (the growth since it, in each child's
    log): ``check`` is called with the turns done so far."""

    def __init__(self, root: int, *, warmup: int, last: int) -> None:
        self.root = root
        self.marks = [warmup, max(warmup + 1, last - max(50, last // 50))] if os.environ.get(ENV) else []

    def check(self, turns: int) -> None:
        if self.marks and turns >= self.marks[0]:
            self.marks.pop(0)
            names = []
            for pid in tree_pids(self.root):
                name = _name(pid)
                if name not in (None, "zygote") and wanted(name):  # type: ignore[arg-type]
                    os.kill(pid, signal.SIGUSR2)
                    names.append(name)
            print(f"  heap dump asked of {', '.join(names) or 'nobody'} at turn {turns}", flush=True)
