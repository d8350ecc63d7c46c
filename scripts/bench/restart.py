"""Restart latency (SIGKILL a child → its next incarnation ready, p50/p99) at one kill per second, and the
idle RSS of the whole tree.

Run: .venv/bin/python scripts/bench/restart.py [--kills 60] [--every 1.0] [--children control,loop-1]
Kills go round robin over the children (all by default) every ``--every`` seconds, on the default
``[supervisor]`` settings (a ready child is restarted at once; nothing is tuned for the bench); a child that
is not running when its turn comes is skipped and counted. Baseline in the same run: a bare ``python -c pass``
start, and one that imports what every child imports.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from actors.bus import Bus
from actors.tree.client import start_daemon, stop_tree, tree_status
from actors.tree.instance_lock import InstanceLock
from geode.home import GeodeHome
from geode.protocol import lifecycle

CONFIG = ""  # the defaults: this measures the restart policy a user gets


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def start_cost(code: str, n: int = 5) -> float:
    runs = []
    for _ in range(n):
        t = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], check=True)
        runs.append(time.perf_counter() - t)
    return statistics.median(runs)


def rss_kib(pid: int) -> tuple[int, int]:
    rss = pss = 0
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1])
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                pss = int(line.split()[1])
    except OSError:
        pass
    return rss, pss


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--kills", type=int, default=60)
    ap.add_argument("--every", type=float, default=1.0, help="seconds between kills")
    ap.add_argument("--children", default="", help="comma-separated names to kill (default: all)")
    args = ap.parse_args()
    home = GeodeHome(Path(tempfile.mkdtemp(prefix="geode-restart-"))).ensure()
    home.config_file.write_text(CONFIG)
    try:
        bench(home, args)
    finally:
        stop_tree(home)  # also when the tree never came up or a kill was not answered


def bench(home: GeodeHome, args: argparse.Namespace) -> None:
    t0 = time.perf_counter()
    rc, msg = start_daemon(home)
    cold = time.perf_counter() - t0
    assert rc == 0, msg
    ready: dict[tuple[str, int], float] = {}
    started: dict[tuple[str, int], float] = {}
    got = threading.Condition()

    def on_event(topic: str, body: dict[str, Any]) -> None:
        if topic == lifecycle.CHILD_STARTED:
            started.setdefault((body["name"], body["incarnation"]), time.perf_counter())
        if topic == lifecycle.CHILD_READY:
            with got:
                ready[(body["name"], body["incarnation"])] = time.perf_counter()
                got.notify_all()

    watcher = Bus("bench-watch", 1, home).start()
    watcher.subscribe("supervisor", on_event)
    time.sleep(1.0)  # let the tree settle and the subscription join (PUB/SUB slow joiner)
    st = tree_status(home)
    assert st is not None
    sup_pid = InstanceLock(home.lock_file).holder_pid() or 0
    pids = [sup_pid] + ([st.zygote.pid] if st.zygote else []) + [c.pid for c in st.children if c.pid]
    mem = [rss_kib(p) for p in pids]
    names = [c.name for c in st.children]
    targets = [n for n in args.children.split(",") if n] or names
    lat: dict[str, list[float]] = {}
    load = os.getloadavg()
    pending: dict[tuple[str, int], float] = {}
    skipped = 0
    start = time.perf_counter()
    for i in range(args.kills):
        due = start + i * args.every
        time.sleep(max(0.0, due - time.perf_counter()))  # the bench's kill clock, not a test wait
        st = tree_status(home)
        assert st is not None and st.state == "running", "the tree stopped"
        c = next(c for c in st.children if c.name == targets[i % len(targets)])
        if not c.pid or c.state != "running":
            skipped += 1
            continue
        pending[(c.name, c.incarnation + 1)] = time.perf_counter()
        os.kill(c.pid, signal.SIGKILL)

    def first_ready(name: str, inc: int) -> float | None:  # that incarnation, or a later one (ready timeout)
        return min((t for (n, i), t in ready.items() if n == name and i >= inc), default=None)

    with got:
        got.wait_for(lambda: all(first_ready(*k) is not None for k in pending), timeout=60)
    missing = [k for k in pending if first_ready(*k) is None]
    assert not missing, f"never ready again: {missing}"
    for (name, inc), t in pending.items():
        lat.setdefault(name, []).append((first_ready(name, inc) or t) - t)
    final = tree_status(home)
    assert final is not None
    not_running = [f"{c.name}={c.state}" for c in final.children if c.state != "running"]
    watcher.stop()
    stop_tree(home)
    bare = start_cost("pass")
    imports = start_cost("import zmq, pydantic, msgpack, geode.protocol.runtime, actors.bus")
    allv = [x for v in lat.values() for x in v]
    respawn = [started[k] - t for k, t in pending.items() if k in started]
    print(
        f"load average (1 min) before/after the kills: {load[0]:.1f} / {os.getloadavg()[0]:.1f}"
        f" on {os.cpu_count()} cores"
    )
    print(f"tree cold start (geode serve → all {len(names)} children ready): {cold:.2f} s")
    print(
        f"kill -> next incarnation ready, {len(allv)} SIGKILLs one per {args.every:g} s "
        f"(round robin over {', '.join(targets)}; {skipped} skipped: not running at their turn):"
    )
    p50, p90, p99 = pct(allv, 0.5), pct(allv, 0.9), pct(allv, 0.99)
    print(
        f"  p50 {p50 * 1000:.0f} ms  p90 {p90 * 1000:.0f} ms  p99 {p99 * 1000:.0f} ms"
        f"  max {max(allv) * 1000:.0f} ms  (target p50 <= 500 ms, p99 <= 2000 ms)"
    )
    if respawn:
        print(
            f"  of which the supervisor's own delay (kill -> next process spawned): p50"
            f" {pct(respawn, 0.5) * 1000:.0f} ms  p99 {pct(respawn, 0.99) * 1000:.0f} ms; the rest is the"
            " child's interpreter start and imports"
        )
    print(f"  after the kills: tree {final.state}; not running: {', '.join(not_running) or 'none'}")
    for name, v in lat.items():
        print(f"    {name:<11} median {statistics.median(v) * 1000:.0f} ms over {len(v)}")
    print(
        f"  baseline: bare python start {bare * 1000:.0f} ms, python + bus imports {imports * 1000:.0f} ms;"
        f" restart p50 / bare start = {p50 / bare:.1f}x, / import start = {p50 / imports:.1f}x"
    )
    total_rss, total_pss = sum(m[0] for m in mem), sum(m[1] for m in mem)
    print(
        f"idle memory of the tree ({len(pids)} processes): RSS {total_rss / 1024:.0f} MiB, "
        f"PSS {total_pss / 1024:.0f} MiB (supervisor RSS {mem[0][0] / 1024:.0f} MiB; 1 s after ready)"
    )


if __name__ == "__main__":
    main()
