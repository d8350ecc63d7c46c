"""The cost of tracing per turn (issue 33 item 1): three `geode serve` trees at once on one scripted model —
telemetry off, on (exporting to a local OTLP/HTTP receiver), and on toward a collector that is down (a
closed port) — and turns interleaved across them in one run (off, on, down, off, on, down, ...), so machine
load falls on every setting alike. Each turn is one prompt with one tool call (write_file, approved through
the control socket: two model calls, the executor, the store). Reports per setting the turn's wall time
(submit → done at the client) p50 / p90 / IQR, and what the receiver got.

    .venv/bin/python scripts/bench/telemetry.py --turns 30
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from actors.cli.client import ControlClient  # noqa: E402
from actors.tree.client import stop_tree  # noqa: E402
from geode.home import GeodeHome  # noqa: E402
from geode.testing.otlp_receiver import OtlpReceiver  # noqa: E402
from geode.testing.scripted import ScriptedServer  # noqa: E402

CONFIG = """
[providers]
model = "claude-sonnet-5"
[providers.anthropic]
base_url = "{url}"
[tools]
roots = ["{ws}"]
[loop]
workers = 2
{telemetry}
"""


def reply(req: Any) -> Any:
    """First call: write a file named after the prompt's last word; after the tool result: a text."""
    content = req.body["messages"][-1].get("content")
    if isinstance(content, list) and any(b.get("type") == "tool_result" for b in content):
        return {"text": "wrote it"}
    text = content if isinstance(content, str) else " ".join(b.get("text", "") for b in content or [])
    ws, name = text.split()[-2], text.split()[-1]
    return {
        "tool_calls": [{"name": "write_file", "input": {"file_path": f"{ws}/{name}.txt", "content": name}}]
    }


def closed_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def start(base: Path, url: str, telemetry: str) -> tuple[GeodeHome, Path]:
    home = GeodeHome(base / "gh").ensure()
    ws = base / "ws"
    ws.mkdir(parents=True, exist_ok=True)
    home.config_file.write_text(CONFIG.format(url=url, ws=ws, telemetry=telemetry))
    home.env_file.write_text("ANTHROPIC_API_KEY=sk-bench-key\n")
    env = {**os.environ, "GEODE_HOME": str(home.root), "PYTHONPATH": str(ROOT)}
    r = subprocess.run(
        [sys.executable, "-m", "actors.cli.main", "serve"], env=env, cwd=ROOT, capture_output=True
    )
    assert r.returncode == 0, r.stderr.decode()[-2000:]
    return home, ws


def turn(home: GeodeHome, ws: Path, n: int) -> float:
    cl = ControlClient(home)
    cl.connect(cwd=str(ws), is_tty=True)
    try:
        t0 = time.perf_counter()
        out = cl.run_prompt(f"please write {ws} f{n}", on_approval=lambda d: "y", timeout_s=60)
        spent = time.perf_counter() - t0
    finally:
        cl.close()
    assert out["termination_reason"] == "natural", out
    return spent


def row(name: str, xs: list[float]) -> str:
    xs = sorted(xs)
    q = statistics.quantiles(xs, n=4)
    p90 = xs[min(len(xs) - 1, int(0.9 * len(xs)))]
    return (
        f"{name:<6} p50 {statistics.median(xs) * 1000:6.1f} ms  p90 {p90 * 1000:6.1f} ms  "
        f"IQR {q[0] * 1000:6.1f}-{q[2] * 1000:6.1f} ms  (n={len(xs)})"
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--turns", type=int, default=30, help="turns per setting")
    ap.add_argument("--warm", type=int, default=3, help="untimed turns per setting first")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp, OtlpReceiver() as rx, ScriptedServer(reply) as model:
        base = Path(tmp)
        settings = {
            "off": "",
            "on": f'[telemetry]\notlp_endpoint = "{rx.endpoint}"\n',
            "down": f'[telemetry]\notlp_endpoint = "http://127.0.0.1:{closed_port()}/v1/traces"\n',
        }
        trees = {k: start(base / k, model.base_url, v) for k, v in settings.items()}
        times: dict[str, list[float]] = {k: [] for k in settings}
        try:
            for i in range(args.warm + args.turns):
                for k, (home, ws) in trees.items():
                    spent = turn(home, ws, i)
                    if i >= args.warm:
                        times[k].append(spent)
            time.sleep(1.5)  # the last batches reach the receiver (schedule_delay_s = 1)
        finally:
            for home, _ in trees.values():
                stop_tree(home, timeout_s=20)
        print(
            f"one turn with one tool call, wall time at the client; {args.turns} turns per setting, "
            "interleaved"
        )
        for k, xs in times.items():
            print(row(k, xs))
        base_p50 = statistics.median(times["off"])
        for k in ("on", "down"):
            d = statistics.median(times[k]) - base_p50
            print(f"{k} - off: p50 {d * 1000:+.1f} ms per turn")
        spans = rx.spans()
        traces = {s.trace_id for s in spans}
        print(
            f"receiver: {len(spans)} spans in {len(traces)} traces "
            f"({len(spans) / max(1, len(traces)):.1f} per turn)"
        )
        names: dict[str, int] = {}
        for s in spans:
            names[s.name] = names.get(s.name, 0) + 1
        print("span names:", ", ".join(f"{n} x{c}" for n, c in sorted(names.items())))


if __name__ == "__main__":
    main()
