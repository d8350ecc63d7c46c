"""Turns/s with one vs two worker hosts (issue 17) in the network-namespace bed (scripts/netns-hosts).

The main tree runs in geode-main; its one local loop worker is SIGSTOPped before the measurement, so lanes
presumes it dead (3 missed heartbeats) and every turn runs on a worker host's loop workers (the bench counts
the turns by the worker recorded in each turn record and says so if main did any). The model is the scripted
provider on main's address answering each call after ``--latency`` seconds (one call per turn, no tools).
Main's ``[lanes] global_cap`` (turns running at once) is left unset by default: it follows the capacity
the registered loop workers offer (up to ``max_global_cap``, 64). ``--global-cap N`` sets it instead (at a
fixed 4, it, not the hosts, bounds the throughput). ``--concurrency`` clients, each its own session over
main's control socket, send turns back to back. Phase 1: worker host w1 alone; phase 2: w2 joins with the
same children. Printed: turns/s per phase (turns ending in the measured window, after ``--warm`` s) and
the ratio.

Run (root): .venv/bin/python scripts/bench/hosts_throughput.py [--latency 0.3] [--seconds 20]
            [--concurrency 16] [--workers 2] [--capacity 2] [--global-cap N]
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from actors.bus import Bus
from actors.cli.client import ControlClient
from actors.tree.client import tree_status
from geode.records.store_client import StoreClient
from tests.multihost.netns_kit import Bed, Cluster, Worker, unavailable
from tests.waiting import poll_for


def local_worker_pid(c: Cluster) -> int:
    st = tree_status(c.main)
    assert st is not None, "main's tree is not running"
    return next(ch.pid for ch in st.children if ch.name == "loop-1" and ch.pid)


def lanes_workers(c: Cluster) -> list[str]:
    return [str(w["worker"]) for w in c.status()["lanes"]["workers"]]


def measure(c: Cluster, seconds: float, concurrency: int, warm_s: float) -> tuple[int, float, list[float]]:
    """Turns completed in the measured window (after ``warm_s``), its length, and their latencies."""
    stop = threading.Event()
    done: list[tuple[float, float]] = []  # (end time, turn latency)
    failures: list[str] = []
    lock = threading.Lock()

    def client(i: int) -> None:
        cl = ControlClient(c.main)
        try:
            cl.connect(cwd=str(c.ws), is_tty=False, timeout_s=30)
            n = 0
            while not stop.is_set():
                t0 = time.monotonic()
                r = cl.run_prompt(f"bench {i}-{n}", timeout_s=120)
                n += 1
                with lock:
                    if r.get("termination_reason") == "natural":
                        done.append((time.monotonic(), time.monotonic() - t0))
                    else:
                        failures.append(str(r.get("termination_reason")))
        except Exception as exc:  # a bench client: report, do not hide
            with lock:
                failures.append(repr(exc))
        finally:
            cl.close()

    threads = [threading.Thread(target=client, args=(i,), daemon=True) for i in range(concurrency)]
    start = time.monotonic()
    for t in threads:
        t.start()
    stop.wait(warm_s + seconds)
    stop.set()
    end = start + warm_s + seconds
    for t in threads:
        t.join(150)
    if failures:
        print(f"  {len(failures)} turns/clients failed: {failures[:3]}")
    window = [lat for (at, lat) in done if start + warm_s <= at <= end]
    return len(window), seconds, window


def turns_by_worker(c: Cluster, since: float) -> Counter[str]:
    bus = Bus("bench-hosts", 1, c.main).start()
    try:
        turns = StoreClient(bus.transport, timeout_s=30).list_turns()
    finally:
        bus.stop()
    return Counter(str(t.worker) for t in turns if t.created_at >= since)


def report(name: str, n: int, seconds: float, lats: list[float], workers: Counter[str]) -> float:
    rate = n / seconds
    p50 = statistics.median(lats) if lats else float("nan")
    who = ", ".join(f"{w} {k}" for w, k in sorted(workers.items()))
    print(
        f"{name:10} {rate:6.2f} turns/s ({n} turns in {seconds:g} s, turn p50 {p50:.2f} s); by worker: {who}"
    )
    return rate


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--latency", type=float, default=0.3, help="seconds per model call")
    p.add_argument("--seconds", type=float, default=20.0, help="measured seconds per phase")
    p.add_argument("--warm", type=float, default=3.0, help="seconds before measuring, per phase")
    p.add_argument("--concurrency", type=int, default=16, help="clients sending turns back to back")
    p.add_argument("--workers", type=int, default=2, help="loop workers per worker host")
    p.add_argument("--capacity", type=int, default=2, help="turns per loop worker")
    p.add_argument("--global-cap", type=int, default=None, help="main's [lanes] global_cap (default: unset)")
    a = p.parse_args()
    if (why := unavailable()) is not None:
        print(f"hosts_throughput: {why}")
        return 2

    def model(req: Any) -> Any:
        time.sleep(a.latency)  # the scripted latency (a server thread per request)
        return {"text": "ok"}

    base = Path(tempfile.mkdtemp(prefix="geode-bench-hosts-"))
    bed = Bed.up()
    c: Cluster | None = None
    stopped = 0
    try:
        server = bed.start_provider(model)
        (base / "ws").mkdir()
        c = Cluster(bed, server, base / "ws")
        for h in bed.hosts:
            c.keys_init(h)
        cap = f"[lanes]\nglobal_cap = {a.global_cap}\n" if a.global_cap else ""
        c.serve_main(loop_workers=1, capacity=1, extra=cap)
        stopped = local_worker_pid(c)
        os.kill(stopped, signal.SIGSTOP)
        poll_for(lambda: "loop-1" not in lanes_workers(c), 20, interval_s=0.5, what="lanes to drop loop-1")
        spec = {"loop_workers": a.workers, "capacity": a.capacity}
        names = {f"loop-{i + 1}" for i in range(a.workers)}
        c.serve_workers(Worker("w1", "loop", **spec))  # type: ignore[arg-type]
        c.wait_host("w1", lambda k: {n.split("/")[-1] for n in k} >= names, 60)
        print(
            f"latency {a.latency} s/call, {a.concurrency} clients, {a.workers} loop workers x {a.capacity} "
            f"turns per worker host; main's [lanes] global_cap {a.global_cap or 'unset'}; "
            f"main's local loop worker stopped (pid {stopped})"
        )
        since = time.time()
        n1, s1, l1 = measure(c, a.seconds, a.concurrency, a.warm)
        one = report("one host", n1, s1, l1, turns_by_worker(c, since))
        print(f"  lanes' global cap with w1: {c.status()['lanes']['lanes']['global_cap']}")
        c.serve_workers(Worker("w2", "loop", **spec))  # type: ignore[arg-type]
        c.wait_host("w2", lambda k: {n.split("/")[-1] for n in k} >= names, 60)
        since = time.time()
        n2, s2, l2 = measure(c, a.seconds, a.concurrency, a.warm)
        two = report("two hosts", n2, s2, l2, turns_by_worker(c, since))
        print(f"  lanes' global cap with w1 and w2: {c.status()['lanes']['lanes']['global_cap']}")
        print(f"ratio two/one: {two / one:.2f}x (goal >= 1.7x)" if one else "ratio: no turns in phase 1")
    finally:
        if stopped:
            try:
                os.kill(stopped, signal.SIGCONT)
            except ProcessLookupError:
                pass
        if c is not None:
            c.stop_all()
            c.server.stop()
        bed.down()
    return 0


if __name__ == "__main__":
    sys.exit(main())
