"""System calls per durable write of the store child: what a commit and its hand-offs cost the kernel.

A store child (this checkout, and with ``--old DIR`` one running that tree's code) takes timeline appends
from 1 client, then from ``--clients`` concurrent clients, as ``store_commit.py`` sends them; during each
round ``strace -c -f`` counts the child's system calls (every thread). Printed per write: the syncs of the
commits (``fdatasync``; LMDB writes its meta page through an ``O_DSYNC`` descriptor, a ``pwrite64`` that
syncs too), the page writes, the thread wake-ups (``futex``), the polls of the bus and of zmq's threads
(``poll``, ``epoll_wait``), and the rest. strace slows the child: the counts are the figure, not the rate.

    .venv/bin/python scripts/bench/store_syscalls.py [--seconds 3] [--clients 50] [--payload tool] [--old DIR]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import store_commit  # noqa: E402

from geode.home import GeodeHome  # noqa: E402
from geode.records.store_client import StoreClient  # noqa: E402

SHOWN = ("fdatasync", "pwrite64", "writev", "futex", "poll", "epoll_wait", "getpid", "sendto", "recvfrom")


def counted(pid: int, seconds: float) -> dict[str, int]:
    """``{syscall: calls}`` of every thread of ``pid`` over ``seconds`` (strace -c -f)."""
    proc = subprocess.run(
        ["timeout", "-s", "INT", str(seconds), "strace", "-c", "-f", "-p", str(pid)],
        capture_output=True,
        text=True,
    )
    out: dict[str, int] = {}
    for line in proc.stderr.splitlines():
        parts = line.split()
        if len(parts) >= 5 and parts[0][0].isdigit() and parts[-1] != "total":
            out[parts[-1]] = int(parts[3])
    return out


def one_round(client: StoreClient, pid: int, clients: int, seconds: float, kind: str) -> str:
    counts = {"n": 0}
    stop = threading.Event()
    tag = f"sc{time.monotonic_ns()}"

    def run() -> None:  # store_commit's clients, for the whole round
        while not stop.is_set():
            store_commit.clients_rate(client, clients, 0.5, f"{tag}-{counts['n']}", kind=kind)
            counts["n"] += 1

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    time.sleep(0.7)
    before = client.stats()["writer"]["ops"]
    calls = counted(pid, seconds)
    writes = max(1, client.stats()["writer"]["ops"] - before)
    stop.set()
    worker.join(30)
    shown = "  ".join(f"{name} {calls.get(name, 0) / writes:.2f}" for name in SHOWN)
    rest = sum(n for name, n in calls.items() if name not in SHOWN) / writes
    total = sum(calls.values()) / writes
    return f"{clients:3d} clients, {writes} writes: per write {total:.1f} calls: {shown}  other {rest:.2f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--clients", type=int, default=50)
    ap.add_argument("--payload", choices=("small", "tool"), default="tool")
    ap.add_argument("--old", type=Path, help="a tree of older geode/actors: its store child beside this one")
    args = ap.parse_args()
    if shutil.which("strace") is None:
        sys.exit("store_syscalls: strace is not installed")
    from actors.bus import Bus

    venv = ROOT / ".venv"
    tmp = Path(tempfile.mkdtemp(prefix="bench-syscalls-", dir=venv if venv.is_dir() else None))
    print(f"store child system calls per durable write (load {os.getloadavg()[:3]})")
    codes = {"new": ROOT, **({"old": args.old.resolve()} if args.old else {})}
    try:
        for label, code in codes.items():
            home = GeodeHome(tmp / f"bus-{label}").ensure()
            proc = store_commit.start_child(home, code)
            bus = Bus("bench", 1, home).start()
            try:
                client = StoreClient(bus.transport, timeout_s=30.0)
                for clients in (1, args.clients):
                    print(f"  {label}: {one_round(client, proc.pid, clients, args.seconds, args.payload)}")
            finally:
                bus.stop()
                proc.terminate()
                proc.wait(10)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"  load average at the end: {os.getloadavg()[:3]}")


if __name__ == "__main__":
    main()
