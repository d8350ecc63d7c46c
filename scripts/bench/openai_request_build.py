"""The OpenAI adapters' host cost per tool round of a turn: the request body built and encoded, and the whole
``complete()`` call (real SDK client, non-streaming) against the scripted provider in a child process.

A turn of K rounds (53 tools, ~16 KB system prompt, one tool call and its result per round) is replayed as
the loop sends it: request ``r`` carries the turn's first message and the ``r`` earlier rounds, the very
same message objects every round. Reported per request: the body's build+encode CPU (the thread's, median
over turns) and the process CPU of ``complete()``. With ``--old DIR`` the same measurement runs from an
older tree (``git archive <rev> geode actors | tar -x -C DIR``) in a child process, alternating with this
checkout's, so both see the same load.

    .venv/bin/python scripts/bench/openai_request_build.py [--rounds 20] [--turns 15] [--old DIR]
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

WIRES = {"openai-chat": "glm-5.3", "openai-responses": "gpt-6-sol"}


def _turn(rounds: int) -> list[list[object]]:
    """The messages of each request of one turn (fresh message objects per turn)."""
    from geode.conversation import Message, TextBlock, ToolResultBlock, ToolUseBlock

    history: list[object] = [Message.user_text("Please inspect the repository.")]
    requests = []
    for r in range(rounds + 1):
        requests.append(list(history))
        call = ToolUseBlock(
            id=f"call_{r}", name=f"tool_{r % 53}", input={"path": f"src/file_{r}.py", "limit": 50}
        )
        history.append(Message(role="assistant", content=(TextBlock(text=f"Looking at file {r}."), call)))
        result = ToolResultBlock(tool_use_id=f"call_{r}", content=json.dumps({"lines": ["x = 1"] * 40}))
        history.append(Message(role="user", content=(result,)))
    return requests


def requests(model: str, system: tuple, tools: tuple, rounds: int, session: str) -> list:
    """A fresh turn's requests (new message objects), all of one conversation."""
    from geode.providers.types import ModelRequest

    meta = {"session_id": session}
    return [
        ModelRequest(model=model, system=system, messages=tuple(m), tools=tools, stream=False, metadata=meta)
        for m in _turn(rounds)
    ]


def measure(rounds: int, turns: int, base: str) -> dict[str, dict[str, float]]:
    from geode.providers import adapter_base
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
    encode = getattr(adapter_base, "encode_body", None) or (
        lambda b: json.dumps(b, ensure_ascii=False).encode()
    )
    out: dict[str, dict[str, float]] = {}
    for wire, model in WIRES.items():
        ep = Endpoint(provider=wire.split("-")[0], base_url=f"{base}/v1", api_key="bench")
        adapter = make_adapter(wire, ep)
        body_of = getattr(adapter, "wire_body", adapter.build_body)
        build_ms: list[float] = []
        cpu_ms: list[float] = []
        for t in range(turns):
            reqs = requests(model, system, tools, rounds, f"build-{t % 3}")
            t0 = time.thread_time()
            for req in reqs:
                encode(body_of(req))
            build_ms.append((time.thread_time() - t0) * 1000 / len(reqs))
            reqs = requests(model, system, tools, rounds, f"call-{t % 3}")
            c0 = time.process_time()
            for req in reqs:
                adapter.complete(req)
            cpu_ms.append((time.process_time() - c0) * 1000 / len(reqs))
        out[wire] = {
            "build_ms": statistics.median(build_ms[1:]),
            "complete_cpu_ms": statistics.median(cpu_ms[1:]),
        }
    return out


def start_server() -> tuple[subprocess.Popen[str], str]:
    scenario = Path(tempfile.mkdtemp()) / "bench.json"
    reply = {"text": "Reading it now.", "tool_calls": [{"name": "tool_1", "input": {"path": "a.py"}}]}
    scenario.write_text(json.dumps({"replies": [reply], "repeat_last": True}))
    proc = subprocess.Popen(
        [sys.executable, "-m", "actors.cli.main", "scripted-provider", "--scenario", str(scenario)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert proc.stdout is not None
    return proc, proc.stdout.readline().strip()


def child(rounds: int, turns: int, base: str, tree: str | None) -> dict[str, dict[str, float]]:
    env = {**os.environ, "PYTHONPATH": tree} if tree else dict(os.environ)
    cmd = [
        sys.executable,
        os.path.abspath(__file__),
        "--child",
        base,
        "--rounds",
        str(rounds),
        "--turns",
        str(turns),
    ]
    done = subprocess.run(cmd, env=env, cwd=tree or None, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--turns", type=int, default=15)
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
        print(f"OpenAI adapters per request, K={args.rounds} rounds, {args.turns} turns per run")
        print("| run | tree | wire | build+encode CPU ms/request | complete() CPU ms/request | load |")
        print("|---|---|---|---|---|---|")
        for n in range(args.repeat):
            for name, tree in trees:
                figures = child(args.rounds, args.turns, base, tree)
                load = "/".join(f"{x:.1f}" for x in os.getloadavg())
                for wire, f in figures.items():
                    build, cpu = f["build_ms"], f["complete_cpu_ms"]
                    print(f"| {n + 1} | {name} | {wire} | {build:.3f} | {cpu:.2f} | {load} |")
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


if __name__ == "__main__":
    main()
