"""Per-call host overhead of the provider adapters vs the SDK's typed path vs a raw httpx2 baseline.

Runs the scripted provider in a child process (`geode scripted-provider`) so its work does not share our GIL,
then times K calls per path for a round-0 request (53 tools, 16 KB system prompt) and a round-20 request (same
plus 20 tool rounds of history). Prints median/p90 ms per call and the ratio to the raw baseline.

    .venv/bin/python scripts/bench/provider_overhead.py [--calls 200]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from geode.conversation import Message, TextBlock, ToolResultBlock, ToolUseBlock
from geode.providers.adapter_base import Endpoint
from geode.providers.anthropic_messages import AnthropicMessagesAdapter
from geode.providers.openai_chat import OpenAIChatAdapter
from geode.providers.types import ModelRequest, SystemSection, ToolSchema


def make_request(rounds: int, stream: bool) -> ModelRequest:
    tools = tuple(
        ToolSchema(
            name=f"tool_{i}",
            description=f"Tool number {i}: does a thing with a path and options. " * 3,
            input_schema={
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "a path"},
                    "limit": {"type": "integer", "minimum": 1, "maximum": 1000},
                    "mode": {"type": "string", "enum": ["a", "b", "c"]},
                    "flags": {"type": "array", "items": {"type": "string"}},
                },
                "required": ["path"],
            },
        )
        for i in range(53)
    )
    system = (
        SystemSection(name="base", text="You are GEODE. " * 700, cache_boundary=True),
        SystemSection(name="turn", text="Session context. " * 100),
    )
    messages: list[Message] = [Message.user_text("Please inspect the repository.")]
    for r in range(rounds):
        call = ToolUseBlock(
            id=f"toolu_{r}", name=f"tool_{r % 53}", input={"path": f"src/file_{r}.py", "limit": 50}
        )
        messages.append(Message(role="assistant", content=(TextBlock(text=f"Looking at file {r}."), call)))
        result = ToolResultBlock(tool_use_id=f"toolu_{r}", content=json.dumps({"lines": ["x = 1"] * 40}))
        messages.append(Message(role="user", content=(result,)))
    return ModelRequest(
        model="claude-opus-5-5",
        system=system,
        messages=tuple(messages),
        tools=tools,
        stream=stream,
        max_tokens=4096,
    )


def timed_interleaved(fns: list[Callable[[], object]], calls: int) -> list[tuple[float, float]]:
    """Median/p90 ms per function, sampled round-robin so machine noise hits every path alike."""
    for fn in fns:
        for _ in range(max(5, calls // 10)):
            fn()
    samples: list[list[float]] = [[] for _ in fns]
    for _ in range(calls):
        for i, fn in enumerate(fns):
            t0 = time.perf_counter()
            fn()
            samples[i].append((time.perf_counter() - t0) * 1000)
    out = []
    for s in samples:
        s.sort()
        out.append((statistics.median(s), s[int(len(s) * 0.9)]))
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


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=200)
    args = ap.parse_args()
    import anthropic
    import httpx2
    import openai

    proc, base = start_server()
    try:
        ep = Endpoint(provider="anthropic", base_url=base, api_key="bench")
        adapter = AnthropicMessagesAdapter(ep)
        sdk = anthropic.Anthropic(base_url=base, api_key="bench", max_retries=0)
        raw = httpx2.Client(
            base_url=base, headers={"authorization": "Bearer bench", "anthropic-version": "2026-10-21"}
        )
        oai_adapter = OpenAIChatAdapter(Endpoint(provider="openai", base_url=f"{base}/v1", api_key="bench"))
        oai_sdk = openai.OpenAI(base_url=f"{base}/v1", api_key="bench", max_retries=0)
        print(f"provider overhead per call, {args.calls} calls, scripted server in a child process")
        print(f"{'case':<44}{'median ms':>10}{'p90 ms':>9}{'x raw':>8}")
        for rounds in (0, 20):
            for stream in (False, True):
                req = make_request(rounds, stream)
                body = adapter.build_body(req)
                kw = {k: v for k, v in body.items() if k != "stream"}

                def raw_call(body: dict = body, stream: bool = stream) -> None:
                    if stream:
                        with raw.stream(
                            "POST",
                            "/v1/messages",
                            content=json.dumps(body),
                            headers={"content-type": "application/json"},
                        ) as r:
                            for _ in r.iter_lines():
                                pass
                    else:
                        json.loads(
                            raw.post(
                                "/v1/messages",
                                content=json.dumps(body),
                                headers={"content-type": "application/json"},
                            ).content
                        )

                def typed_call(kw: dict = kw, stream: bool = stream) -> None:
                    if stream:
                        with sdk.messages.stream(**kw) as s:
                            s.get_final_message()
                    else:
                        sdk.messages.create(**kw)

                def adapter_call(req: ModelRequest = req) -> None:
                    adapter.complete(req)

                oreq = req.model_copy(update={"model": "glm-5.3"})
                obody = oai_adapter.build_body(oreq)
                okw = {k: v for k, v in obody.items() if k not in ("stream", "stream_options", "max_tokens")}

                def oai_typed(okw: dict = okw, stream: bool = stream) -> None:
                    if stream:
                        for _ in oai_sdk.chat.completions.create(**okw, max_tokens=4096, stream=True):
                            pass
                    else:
                        oai_sdk.chat.completions.create(**okw, max_tokens=4096)

                def oai_adapter_call(oreq: ModelRequest = oreq) -> None:
                    oai_adapter.complete(oreq)

                kib = len(json.dumps(body)) // 1024
                label = f"round {rounds:>2}, {'stream' if stream else 'json  '}, {kib} KB"
                names = [
                    "raw httpx2 + json.dumps (baseline)",
                    "anthropic SDK typed messages." + ("stream" if stream else "create"),
                    "geode anthropic adapter (client.post)",
                    "openai SDK typed chat.completions.create",
                    "geode openai-chat adapter (client.post)",
                    "geode anthropic build_body only",
                ]
                fns = [
                    raw_call,
                    typed_call,
                    adapter_call,
                    oai_typed,
                    oai_adapter_call,
                    lambda req=req: adapter.build_body(req),
                ]
                results = timed_interleaved(fns, args.calls)
                base_med = results[0][0]
                build_med = results[-1][0]
                rows = list(zip(names[:-1], results[:-1], strict=True))
                print(f"-- {label}; geode build_body {build_med:.3f} ms")
                for name, (med, p90) in rows:
                    print(f"   {name:<41}{med:>10.2f}{p90:>9.2f}{med / base_med:>8.2f}")
    finally:
        proc.terminate()
        proc.wait(timeout=5)


if __name__ == "__main__":
    main()
