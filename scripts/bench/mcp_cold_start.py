"""`geode mcp` cold start: spawn → the ``initialize`` result, as an MCP host (Claude Desktop, Cursor) sees it.

Run: .venv/bin/python scripts/bench/mcp_cold_start.py [--runs 10]
Each run spawns `geode mcp` (the console script in the venv) in a fresh empty GEODE_HOME, writes a raw
JSON-RPC ``initialize`` to its stdin and times the first line back; then ``tools/list``, timed from spawn
(the SDK loaded: the first request that needs it). Baselines in the same run: a bare ``python -c pass``
start (to its exit), a bare mcp SDK ``MCPServer`` script (tests/tools/mcp_server.py) to its ``initialize``
result, and `geode mcp` with ``GEODE_MCP_EARLY_INIT=0`` (the SDK answers ``initialize`` itself).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "bench", "version": "0"},
    },
}
LIST = [
    {"jsonrpc": "2.0", "method": "notifications/initialized"},
    {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
]


def geode_cmd() -> list[str]:
    script = Path(sys.executable).parent / "geode"
    return [str(script), "mcp"] if script.exists() else [sys.executable, "-m", "actors.cli.main", "mcp"]


def one(cmd: list[str], env: dict[str, str], *, list_tools: bool) -> tuple[float, float | None]:
    """Seconds from spawn to the initialize result (and to the tools/list result when asked)."""
    t0 = time.perf_counter()
    p = subprocess.Popen(
        cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env
    )
    assert p.stdin is not None and p.stdout is not None
    p.stdin.write(json.dumps(INIT).encode() + b"\n")
    p.stdin.flush()
    line = p.stdout.readline()
    t_init = time.perf_counter() - t0
    assert json.loads(line)["id"] == 1, line
    t_list = None
    if list_tools:
        p.stdin.write(b"".join(json.dumps(m).encode() + b"\n" for m in LIST))
        p.stdin.flush()
        line = p.stdout.readline()
        t_list = time.perf_counter() - t0
        assert json.loads(line)["id"] == 2, line
    p.stdin.close()
    p.wait(timeout=30)
    p.stdout.close()
    return t_init, t_list


def python_pass() -> float:
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", "pass"], check=True)
    return time.perf_counter() - t0


def fmt(xs: list[float]) -> str:
    xs = sorted(xs)
    p90 = xs[min(len(xs) - 1, int(0.9 * len(xs)))]
    return (
        f"p50 {statistics.median(xs) * 1000:6.0f} ms   p90 {p90 * 1000:6.0f} ms   max {xs[-1] * 1000:6.0f} ms"
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=10)
    runs = ap.parse_args().runs
    with tempfile.TemporaryDirectory(prefix="geode-mcp-bench-") as tmp:
        env = {**os.environ, "GEODE_HOME": str(Path(tmp) / "home"), "PYTHONPATH": str(ROOT)}
        cmd = geode_cmd()
        rows: dict[str, list[float]] = {k: [] for k in ("pass", "bare", "early", "list", "sdk")}
        for _ in range(runs):  # interleaved, so load on the machine hits every case alike
            rows["pass"].append(python_pass())
            rows["bare"].append(
                one([sys.executable, str(ROOT / "tests/tools/mcp_server.py")], env, list_tools=False)[0]
            )
            t_init, t_list = one(cmd, env, list_tools=True)
            rows["early"].append(t_init)
            rows["list"].append(t_list or 0.0)
            rows["sdk"].append(one(cmd, {**env, "GEODE_MCP_EARLY_INIT": "0"}, list_tools=False)[0])
    print(
        f"{runs} runs each, load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores; {' '.join(cmd)}"
    )
    print(f"python -c pass (to exit)                       {fmt(rows['pass'])}")
    print(f"bare mcp SDK MCPServer, spawn → initialize     {fmt(rows['bare'])}")
    print(f"geode mcp, spawn → initialize                  {fmt(rows['early'])}   (target ≤ 500 ms)")
    print(f"geode mcp, spawn → tools/list (SDK loaded)     {fmt(rows['list'])}")
    print(f"geode mcp, SDK answers initialize (EARLY=0)    {fmt(rows['sdk'])}")
    ratio = statistics.median(rows["early"]) / statistics.median(rows["pass"])
    print(f"geode mcp initialize / python -c pass (p50)     {ratio:.1f}x")


if __name__ == "__main__":
    main()
