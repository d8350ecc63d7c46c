"""The loop's CPU per model request as a function of the conversation's length (issue 34, LOOPHIST).

One conversation of ``N`` messages (a user request, then tool rounds: an assistant ``tool_use`` and its
``tool_result`` of ~0.5 KB) grows by one round per request, as a long turn does. Per request the loop's
history work is timed as ``prepare_call`` does it (``effective_history``, ``model_view`` with its token
estimate, ``skills_in_use``), then the Anthropic adapter's whole ``complete()`` (wire body, encoding, the
real SDK client's send, the streamed reply) against the scripted provider in a child process. Reported:
the thread CPU per request, median over ``--requests`` requests, at each ``N``; then, apart (a fresh adapter,
no server), the CPU of building the request's body alone (``wire_body`` and its encoding into the bytes or
chunks the socket is given), median of 200 requests growing from ``N``. With ``--old DIR`` the same
runs from an older tree (``git archive <rev> geode actors | tar -x -C DIR``) in a child process, alternating
with this checkout's, so both see the same load.

    .venv/bin/python scripts/bench/history_round.py [--sizes 10,100,1000,3000] [--requests 30] [--old DIR]
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

from openai_request_build import start_server

MODEL = "claude-opus-5-5"


def _round(i: int) -> list:
    from geode.conversation import Message, ToolResultBlock, ToolUseBlock

    call = ToolUseBlock(id=f"toolu_{i:06d}", name="read_file", input={"path": f"src/module_{i}.py"})
    text = f"{i:6d}  def handler_{i}(request):\n" + "    return render(request, 'page.html', context)\n" * 9
    result = ToolResultBlock(tool_use_id=call.id, content=text)
    return [Message(role="assistant", content=(call,)), Message(role="user", content=(result,))]


def measure(sizes: list[int], requests: int, base: str) -> dict[str, float]:
    from geode.conversation import Message
    from geode.loop.compaction import model_view
    from geode.loop.skills_in_use import skills_in_use
    from geode.loop.summarize import effective_history
    from geode.providers import adapter_base
    from geode.providers.adapter_base import Endpoint
    from geode.providers.types import ModelRequest, SystemSection, ToolSchema
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
    adapter = make_adapter("anthropic-messages", Endpoint(provider="anthropic", base_url=base, api_key="b"))
    out: dict[str, float] = {}
    for n in sizes:
        history = [Message.user_text("go through the modules")]
        while len(history) < n:
            history += _round(len(history))
        cpu_ms: list[float] = []
        for r in range(requests + 1):  # the first request encodes the whole history: not counted
            c0 = time.thread_time()
            view = model_view(effective_history(history), budget_tokens=10**9, keep_recent=10)
            skills_in_use(history)
            req = ModelRequest.model_construct(
                model=MODEL,
                system=system,
                messages=tuple(view),
                tools=tools,
                tool_choice="auto",
                max_tokens=4096,
                stream=True,
                metadata={"session_id": f"s-{n}"},
            )
            adapter.complete(req)
            if r:
                cpu_ms.append((time.thread_time() - c0) * 1000)
            history += _round(len(history))
        out[str(n)] = statistics.median(cpu_ms)
    body_adapter = make_adapter(
        "anthropic-messages", Endpoint(provider="anthropic", base_url=base, api_key="b")
    )
    encode = getattr(adapter_base, "body_chunks", None) or adapter_base.encode_body
    for n in sizes:
        history = [Message.user_text("go through the modules")]
        while len(history) < n:
            history += _round(len(history))
        body_us: list[float] = []
        for r in range(201):
            req = ModelRequest.model_construct(
                model=MODEL,
                system=system,
                messages=tuple(history),
                tools=tools,
                tool_choice="auto",
                max_tokens=4096,
                stream=True,
                metadata={"session_id": f"b-{n}"},
            )
            c0 = time.thread_time()
            encode(body_adapter.wire_body(req))
            if r:
                body_us.append((time.thread_time() - c0) * 1e6)
            history += _round(len(history))
        out[f"body-{n}"] = statistics.median(body_us)
    return out


def child(sizes: list[int], requests: int, base: str, tree: str | None) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": tree} if tree else dict(os.environ)
    cmd = [sys.executable, os.path.abspath(__file__), "--child", base, "--requests", str(requests)]
    cmd += ["--sizes", ",".join(map(str, sizes))]
    done = subprocess.run(cmd, env=env, cwd=tree or None, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="10,100,1000,3000")
    ap.add_argument("--requests", type=int, default=30)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--old", help="an older tree's directory (geode and actors), run alternately")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    if args.child:
        print(json.dumps(measure(sizes, args.requests, args.child)))
        return
    proc, base = start_server()
    try:
        trees = [("new", None)] + ([("old", args.old)] if args.old else [])
        print(f"The loop's thread CPU per model request (ms, median of {args.requests}) by history length")
        print("| run | tree | " + " | ".join(f"{n} msgs" for n in sizes) + " | load |")
        print("|---|---|" + "---|" * len(sizes) + "---|")
        body_rows: list[str] = []
        for k in range(args.repeat):
            for name, tree in trees:
                f = child(sizes, args.requests, base, tree)
                load = "/".join(f"{x:.1f}" for x in os.getloadavg())
                cells = " | ".join(f"{f[str(n)]:.3f}" for n in sizes)
                bodies = " | ".join(f"{f[f'body-{n}']:.0f}" for n in sizes)
                print(f"| {k + 1} | {name} | {cells} | {load} |", flush=True)
                body_rows.append(f"| {k + 1} | {name} | {bodies} | {load} |")
        print("\nThe body alone: wire_body + its encoding, thread CPU per request (µs, median of 200)")
        print("| run | tree | " + " | ".join(f"from {n} msgs" for n in sizes) + " | load |")
        print("|---|---|" + "---|" * len(sizes) + "---|")
        print("\n".join(body_rows))
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


if __name__ == "__main__":
    main()
