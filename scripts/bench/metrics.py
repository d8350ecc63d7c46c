"""The cost of Prometheus metrics per turn (issue 33 item 2): two `geode serve` trees at once on one scripted
model, `[metrics]` off and on (with a scraper reading /metrics every second, as Prometheus would), and turns
interleaved across them in one run (off, on, off, on, ...), so machine load falls on both alike. A turn is
one prompt with one tool call (write_file, approved through the control socket), as in
scripts/bench/telemetry.py, whose tree and turn helpers it uses. Reports each setting's turn wall time
(submit → done at the client) p50 / p90 / IQR, the scrape time, and checks the page counted every turn.
Also the cost of one recording call in a process, on and off.

    .venv/bin/python scripts/bench/metrics.py --turns 40
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
_spec = importlib.util.spec_from_file_location("bench_telemetry", ROOT / "scripts/bench/telemetry.py")
assert _spec is not None and _spec.loader is not None
tb = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(tb)

from actors.tree.client import stop_tree  # noqa: E402
from geode.testing.scripted import ScriptedServer  # noqa: E402

CALL = """
import os, sys, time
from geode.metrics import record as r
n = 20000
r.tool_call("read_file", True, "ok")  # the first call builds the instruments (on)
t0 = time.perf_counter()
for _ in range(n):
    r.tool_call("read_file", True, "ok")
t1 = time.perf_counter()
for _ in range(n):
    r.model_call(0.5, "ok")
t2 = time.perf_counter()
print(f"{(t1 - t0) / n * 1e6:.2f} {(t2 - t1) / n * 1e6:.2f}")
"""


def scrape_forever(url: str, stop: threading.Event, took: list[float]) -> None:
    while not stop.wait(1.0):
        t0 = time.perf_counter()
        with urllib.request.urlopen(url, timeout=10) as r:
            r.read()
        took.append(time.perf_counter() - t0)


def page_turns(url: str) -> float:
    from prometheus_client.parser import text_string_to_metric_families

    with urllib.request.urlopen(url, timeout=10) as r:
        text = r.read().decode()
    return sum(
        s.value
        for f in text_string_to_metric_families(text)
        for s in f.samples
        if s.name == "geode_turns_total"
    )


def call_cost(tmp: Path) -> dict[str, str]:
    out = {}
    for k, env in (("off", {}), ("on", {"GEODE_METRICS_DIR": str(tmp / "calls")})):
        (tmp / "calls").mkdir(exist_ok=True)
        r = subprocess.run(
            [sys.executable, "-c", CALL],
            env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), **env},
            capture_output=True,
            text=True,
            check=True,
        )
        counter, histogram = r.stdout.split()
        out[k] = f"counter inc {counter} µs, histogram observe {histogram} µs"
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--turns", type=int, default=30, help="turns per setting")
    ap.add_argument("--warm", type=int, default=3, help="untimed turns per setting first")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp, ScriptedServer(tb.reply) as model:
        base = Path(tmp)
        port = tb.closed_port()
        url = f"http://127.0.0.1:{port}/metrics"
        settings = {"off": "", "on": f'[metrics]\nlisten = "127.0.0.1:{port}"\n'}
        trees = {k: tb.start(base / k, model.base_url, v) for k, v in settings.items()}
        times: dict[str, list[float]] = {k: [] for k in settings}
        stop, scrapes = threading.Event(), []
        scraper = threading.Thread(target=scrape_forever, args=(url, stop, scrapes), daemon=True)
        scraper.start()
        try:
            for i in range(args.warm + args.turns):
                for k, (home, ws) in trees.items():
                    spent = tb.turn(home, ws, i)
                    if i >= args.warm:
                        times[k].append(spent)
            counted = page_turns(url)
        finally:
            stop.set()
            for home, _ in trees.values():
                stop_tree(home, timeout_s=20)
        print(
            f"one turn with one tool call, wall time at the client; {args.turns} turns per setting, "
            "interleaved"
        )
        for k, xs in times.items():
            print(tb.row(k, xs))
        d = statistics.median(times["on"]) - statistics.median(times["off"])
        print(f"on - off: p50 {d * 1000:+.1f} ms per turn")
        print(f"page: {counted:.0f} turns counted of {args.warm + args.turns}")
        if scrapes:
            print(
                f"scrapes: {len(scrapes)}, p50 {statistics.median(scrapes) * 1000:.1f} ms, "
                f"max {max(scrapes) * 1000:.1f} ms"
            )
        for k, line in call_cost(base).items():
            print(f"one recording call, metrics {k}: {line}")


if __name__ == "__main__":
    main()
