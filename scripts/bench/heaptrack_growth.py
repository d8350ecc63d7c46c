"""Native memory growth of one process between two moments, by backtrace, from a heaptrack recording.

heaptrack (attach to a running child: ``heaptrack -p PID``; stop it with gdb ``call heaptrack_stop()`` or let
the child exit) records every malloc/free with its native stack. heaptrack_print reports what is left at the
end, which a soak's final queries and shutdown blur; this reads the decompressed trace (``zstd -dc FILE.zst >
FILE.txt``, format v3) and prints the net bytes allocated between two times (seconds since the attach) per
backtrace and per first library outside libc/libpython: what grew while the process ran steadily.
Usage: heaptrack_growth.py TRACE.txt T1 T2 [TOP]. Found the store's SQLite page cache (session 11).
"""

from __future__ import annotations

import sys
from collections import Counter

PLUMBING = ("libc.so", "libpython", "libstdc++", "?")


class Trace:
    def __init__(self) -> None:
        self.strings = [""]
        self.ips: list[tuple[int, int]] = [(0, 0)]
        self.traces: list[tuple[int, int]] = [(0, 0)]
        self.allocs: list[tuple[int, int]] = []

    def frames(self, tr: int, depth: int) -> list[str]:
        out: list[str] = []
        while tr and len(out) < depth:
            ip, tr = self.traces[tr]
            mod, fn = self.ips[ip]
            out.append(f"{self.strings[fn] if fn else '?'} [{self.strings[mod].rsplit('/', 1)[-1]}]")
        return out


def read(path: str, t1: float, t2: float) -> tuple[Trace, Counter[int], Counter[int]]:
    """The trace's tables and the live count of each allocation site (size + stack) at t1 and at t2."""
    tr, net = Trace(), Counter[int]()
    at1: Counter[int] | None = None
    at2: Counter[int] | None = None
    with open(path) as f:
        for line in f:
            k, rest = line[:1], line[2:].rstrip("\n")
            if k == "+":
                net[int(rest, 16)] += 1
            elif k == "-":
                net[int(rest, 16)] -= 1
            elif k == "c":
                t = int(rest, 16) / 1000
                if at1 is None and t >= t1:
                    at1 = net.copy()
                if at2 is None and t >= t2:
                    at2 = net.copy()
            elif k == "a":
                size, stack = rest.split()
                tr.allocs.append((int(size, 16), int(stack, 16)))
            elif k == "t":
                ip, parent = rest.split()
                tr.traces.append((int(ip, 16), int(parent, 16)))
            elif k == "i":
                p = rest.split()
                tr.ips.append((int(p[1], 16), int(p[2], 16) if len(p) > 2 else 0))
            elif k == "s":
                tr.strings.append(rest.split(" ", 1)[1] if " " in rest else "")
    return tr, at1 or net.copy(), at2 or net.copy()


def main(argv: list[str]) -> int:
    path, t1, t2 = argv[0], float(argv[1]), float(argv[2])
    top = int(argv[3]) if len(argv) > 3 else 10
    tr, at1, at2 = read(path, t1, t2)
    by_stack, blocks = Counter[int](), Counter[int]()
    for site, n in at2.items():
        d = n - at1.get(site, 0)
        if d:
            size, stack = tr.allocs[site]
            by_stack[stack] += d * size
            blocks[stack] += d
    print(f"net malloc'd bytes {t1:g}s -> {t2:g}s: {sum(by_stack.values()) / 1024:.1f} KiB")
    by_lib = Counter[str]()
    for stack, b in by_stack.items():
        fs = tr.frames(stack, 64)
        own = next((f for f in fs if not any(x in f for x in PLUMBING)), fs[0] if fs else "? [?]")
        by_lib[own.rsplit("[", 1)[-1].rstrip("]")] += b
    print("by the first library outside libc/libpython/libstdc++:")
    for lib, b in by_lib.most_common(12):
        print(f"  {b / 1024:9.1f} KiB  {lib}")
    for stack, b in by_stack.most_common(top):
        print(f"\n{b / 1024:.1f} KiB in {blocks[stack]} blocks:")
        for f in tr.frames(stack, 16):
            print("   ", f)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
