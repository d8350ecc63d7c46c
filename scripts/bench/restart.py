"""Restart latency (SIGKILL a child → ready again, p50/p90 over 20 kills) and idle RSS of the whole tree.

Run: .venv/bin/python scripts/bench/restart.py [--kills 20]
Baseline in the same run: a bare ``python -c pass`` start, and one that imports what every child imports.
The bench config sets ``stable_s = 0`` so every kill restarts at once (no crash-loop backoff).
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

CONFIG = "[supervisor]\nstable_s = 0.0\nintensity = 1000\n"


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
    ap.add_argument("--kills", type=int, default=20)
    args = ap.parse_args()
    home = GeodeHome(Path(tempfile.mkdtemp(prefix="geode-restart-"))).ensure()
    home.config_file.write_text(CONFIG)
    t0 = time.perf_counter()
    rc, msg = start_daemon(home)
    cold = time.perf_counter() - t0
    assert rc == 0, msg
    ready: dict[tuple[str, int], float] = {}
    got = threading.Condition()

    def on_event(topic: str, body: dict[str, Any]) -> None:
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
    pids = [sup_pid] + [c.pid for c in st.children if c.pid]
    mem = [rss_kib(p) for p in pids]
    names = [c.name for c in st.children]
    lat: dict[str, list[float]] = {}
    for i in range(args.kills):
        st = tree_status(home)
        assert st is not None
        c = next(c for c in st.children if c.name == names[i % len(names)])
        assert c.pid and c.state == "running"
        t = time.perf_counter()
        os.kill(c.pid, signal.SIGKILL)
        key = (c.name, c.incarnation + 1)
        with got:
            assert got.wait_for(lambda k=key: k in ready, timeout=15), f"{key} not ready again"
        lat.setdefault(c.name, []).append(ready[key] - t)
        time.sleep(0.2)
    watcher.stop()
    stop_tree(home)
    bare = start_cost("pass")
    imports = start_cost("import zmq, pydantic, msgpack, geode.protocol.runtime, actors.bus")
    allv = [x for v in lat.values() for x in v]
    print(f"tree cold start (geode serve → all {len(names)} children ready): {cold:.2f} s")
    print(f"restart after SIGKILL over {len(allv)} kills (round robin over {', '.join(names)}):")
    p50, p90 = pct(allv, 0.5), pct(allv, 0.9)
    print(
        f"  p50 {p50 * 1000:.0f} ms  p90 {p90 * 1000:.0f} ms  max {max(allv) * 1000:.0f} ms"
        "  (target p50 <= 1000 ms)"
    )
    for name, v in lat.items():
        print(f"    {name:<11} median {statistics.median(v) * 1000:.0f} ms over {len(v)}")
    print(
        f"  baseline: bare python start {bare * 1000:.0f} ms, python + bus imports {imports * 1000:.0f} ms;"
        f" restart p50 / bare start = {p50 / bare:.1f}x, / import start = {p50 / imports:.1f}x"
    )
    total_rss, total_pss = sum(m[0] for m in mem), sum(m[1] for m in mem)
    print(
        f"idle memory of the tree ({len(pids)} processes): RSS {total_rss / 1024:.0f} MiB, "
        f"PSS {total_pss / 1024:.0f} MiB (supervisor RSS {mem[0][0] / 1024:.0f} MiB)"
    )


if __name__ == "__main__":
    main()
