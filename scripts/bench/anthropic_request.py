"""The Anthropic adapter's host CPU per model request of a tool round: the whole ``complete()`` call (the
real SDK client, streamed and not) against the scripted provider in a child process.

A turn of K rounds (53 tools, ~16 KB system prompt, one tool call and its result per round) is replayed as
the loop sends it (``openai_request_build.requests``: the very same message objects every round). Reported
per request: the thread CPU of ``complete()``, median over turns. With ``--old DIR`` the same measurement
runs from an older tree (``git archive <rev> geode actors | tar -x -C DIR``) in a child process, alternating
with this checkout's, so both see the same load.

    .venv/bin/python scripts/bench/anthropic_request.py [--rounds 20] [--turns 10] [--old DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from openai_request_build import requests, start_server

MODEL = "claude-opus-5-5"


def measure(rounds: int, turns: int, base: str) -> dict[str, float]:
    from geode.providers.adapter_base import Endpoint
    from geode.providers.types import SystemSection, ToolSchema
    from geode.providers.vendors import make_adapter

    tools = tuple(
        ToolSchema(
            name=f"tool_{i}",
            description=f"Tool number {i}: does a thing with a path and options. " * 3,
            input_schema={"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
        )
        for i in range(53)
    )
    system = (SystemSection(name="base", text="You are GEODE. " * 1100, cache_boundary=True),)
    endpoint = Endpoint(provider="anthropic", base_url=base, api_key="bench")
    adapter = make_adapter("anthropic-messages", endpoint)
    out: dict[str, float] = {}
    for stream in (True, False):
        cpu_ms: list[float] = []
        for t in range(turns + 1):
            reqs = [
                r.model_copy(update={"stream": stream})
                for r in requests(MODEL, system, tools, rounds, f"s-{stream}-{t % 3}")
            ]
            c0 = time.thread_time()
            for req in reqs:
                adapter.complete(req)
            cpu_ms.append((time.thread_time() - c0) * 1000 / len(reqs))
        out["stream" if stream else "json"] = statistics.median(cpu_ms[1:])
    return out


def child(rounds: int, turns: int, base: str, tree: str | None) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": tree} if tree else dict(os.environ)
    cmd = [sys.executable, os.path.abspath(__file__), "--child", base, "--rounds", str(rounds)]
    cmd += ["--turns", str(turns)]
    done = subprocess.run(cmd, env=env, cwd=tree or None, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--turns", type=int, default=10)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--old", help="an older tree's directory (geode and actors), run alternately")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(measure(args.rounds, args.turns, args.child)))
        return
    proc, base = start_server()
    try:
        trees = [("new", None)] + ([("old", args.old)] if args.old else [])
        print(f"Anthropic complete() thread CPU per request, K={args.rounds} rounds, {args.turns} turns")
        print("| run | tree | streamed ms | not streamed ms | load |")
        print("|---|---|---|---|---|")
        for n in range(args.repeat):
            for name, tree in trees:
                f = child(args.rounds, args.turns, base, tree)
                load = "/".join(f"{x:.1f}" for x in os.getloadavg())
                print(f"| {n + 1} | {name} | {f['stream']:.3f} | {f['json']:.3f} | {load} |")
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


if __name__ == "__main__":
    main()
