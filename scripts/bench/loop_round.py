"""Host cost per tool round of AgenticLoop vs a raw loop, measured like reference-performance.md.

Scenario: K rounds that each call a read-only tool, then a final text, against the scripted Anthropic-wire
server (real SDK adapter, streaming), 53 tools and a ~16 KB system prompt. "Gap" = host time between the
fake finishing its reply for round i and receiving the request for round i+1.

* raw: adapter.complete + ToolExecutor.execute in a bare Python loop (no records, no prompt rebuild).
* loop: AgenticLoop with the real ToolExecutor and the real LMDB store (sync on) over LocalTransport:
  prompt rebuilt per call, StepSnapshot, strict pending + completed checkpoints, guards, events.

With ``--processes`` the store and the executor run as real child processes (``actors.tree.child_main``)
reached over ZeroMQ ipc, as in the daemon; the raw loop then calls the executor over the same bus.

Run: .venv/bin/python scripts/bench/loop_round.py [--runs 5] [--processes]
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

from geode.conversation import Message
from geode.home import GeodeHome
from geode.loop import AgenticLoop, LoopSettings
from geode.loop.batch import result_block
from geode.prompt import PromptSources, build_system_prompt
from geode.protocol.transport import LocalTransport
from geode.providers.retry import RetryPolicy
from geode.providers.selection import ProviderSettings, provider_from_settings
from geode.providers.types import ModelRequest
from geode.records.engine import RecordEngine
from geode.records.service import StoreService
from geode.records.store_client import StoreClient
from geode.testing.scripted import ScriptedServer
from geode.tools.builtin.catalogue import builtin_handlers, builtin_specs
from geode.tools.executor import ToolExecutor
from geode.tools.plan import BoundToolPlan
from geode.tools.spec import ToolCall, ToolContext, ToolSpec

MODEL = "claude-sonnet-5"


class Fake:
    """Reply function: tool call until the request carries K tool results, then text; records gaps."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.k = 0
        self.last_reply: float | None = None
        self.gaps: list[float] = []
        self.lock = threading.Lock()

    def __call__(self, req: Any) -> Any:
        now = time.perf_counter()
        msgs = req.body.get("messages", [])
        done = 0  # tool rounds since the current turn's user input
        for m in msgs:
            blocks = m.get("content") if isinstance(m.get("content"), list) else []
            if any(b.get("type") == "tool_result" for b in blocks):
                done += 1
            elif m.get("role") == "user":
                done = 0
        with self.lock:
            if done and self.last_reply is not None:
                self.gaps.append(now - self.last_reply)
            out: Any = (
                {"text": "done"}
                if done >= self.k
                else {
                    "tool_calls": [
                        {
                            "name": "read_file",
                            "input": {"file_path": str(self.path), "offset": done + 1, "limit": 1},
                        }
                    ]
                }
            )
            self.last_reply = time.perf_counter()
        return out


def spawn_children(home: GeodeHome, ws: Path) -> tuple[list[subprocess.Popen[bytes]], Any, Any, Any]:
    from actors.bus import Bus
    from geode.tools.executor_client import ExecutorClient

    home.config_file.write_text(f'[tools]\nroots = ["{ws}"]\n')
    env = {**os.environ, "GEODE_HOME": str(home.root), "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "actors.tree.child_main", name],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for name in ("store", "executor")
    ]
    bus = Bus("bench", 1, home).start()
    records, tools = StoreClient(bus.transport, attempts=20, backoff_s=0.1), ExecutorClient(bus.transport)
    records.list_sessions(limit=1)  # wait for the store
    return procs, bus, records, tools


def setup(tmp: Path, processes: bool = False) -> tuple[Any, ...]:
    ws = tmp / "ws"
    ws.mkdir()
    (ws / "data.txt").write_text("".join(f"line {i}\n" for i in range(40)))
    (ws / "GEODE.md").write_text("## Project\n" + ("Project guidance line for the bench. " * 430) + "\n")
    home = GeodeHome(tmp / "h").ensure()
    procs: list[Any] = []
    if processes:
        procs, _bus, records, remote = spawn_children(home, ws)
        engine = None
    else:
        engine = RecordEngine.for_home(home).open()
        records = StoreClient(LocalTransport({"store": StoreService(engine)}))
    extra = [
        ToolSpec(
            name=f"extra_{i}",
            description=f"synthetic read tool {i} " * 4,
            handler="builtin:list_dir",
            input_schema={"type": "object", "properties": {"path": {"type": "string"}}},
        )
        for i in range(53 - len(builtin_specs()))
    ]
    plan = BoundToolPlan.build([*builtin_specs(), *extra])
    ex = ToolExecutor(owner="bench#1", records=records, handlers=builtin_handlers(), default_workspace=ws)
    ex.bind_plan(plan)
    if processes:
        ex = remote
        for _ in range(50):
            try:
                ex.bind_plan(plan)
                break
            except Exception:
                time.sleep(0.1)
    fake = Fake(ws / "data.txt")
    server = ScriptedServer(fake).start()
    provider = provider_from_settings(
        ProviderSettings(
            model=MODEL,
            provider="anthropic",
            wire="anthropic-messages",
            base_url=server.base_url,
            api_key="sk-bench",
            retry=RetryPolicy(),
        )
    )
    return ws, engine, records, plan, ex, fake, server, provider, procs


def run_raw(k: int, ws: Path, plan: BoundToolPlan, ex: ToolExecutor, provider: Any, n: int) -> None:
    system = build_system_prompt(PromptSources(workspace=ws), model=MODEL)
    messages = [Message.user_text("go")]
    tools = plan.tool_schemas()
    for step in range(k + 1):
        resp = provider.complete(
            ModelRequest(model=MODEL, system=system, messages=tuple(messages), tools=tools), lambda _t: None
        )
        if not resp.tool_calls:
            return
        messages.append(Message(role="assistant", content=tuple(resp.tool_calls)))
        results = []
        for c in resp.tool_calls:
            ctx = ToolContext(
                session_id=f"raw{k}-{n}",
                turn_id="t",
                step_id=f"s{step}",
                operation_id=f"op{n}-{step}",
                plan_hash=plan.content_hash,
                plan_generation=plan.generation,
                workspace=str(ws),
            )
            results.append(result_block(ex.execute(ctx, ToolCall(id=c.id, name=c.name, input=c.input))))
        messages.append(Message(role="user", content=tuple(results)))


def measure(fake: Fake, fn: Any, k: int, runs: int) -> tuple[list[float], list[float]]:
    gaps, walls = [], []
    for i in range(runs + 1):
        fake.k, fake.gaps, fake.last_reply = k, [], None
        t0 = time.perf_counter()
        fn(i)
        if i:  # the first run warms up
            walls.append(time.perf_counter() - t0)
            gaps.extend(fake.gaps)
    return gaps, walls


def fmt(gaps: list[float]) -> str:
    if not gaps:
        return "—"
    q = statistics.quantiles(gaps, n=10)[-1] if len(gaps) >= 2 else gaps[0]
    return f"{statistics.median(gaps) * 1e3:.1f} / {q * 1e3:.1f}"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--processes", action="store_true")
    args = ap.parse_args()
    runs = args.runs
    tmp = Path(tempfile.mkdtemp())
    ws, engine, records, plan, ex, fake, server, provider, procs = setup(tmp, args.processes)
    print(
        f"store + executor: {'child processes over ipc' if args.processes else 'in-process (LocalTransport)'}"
    )
    loop = AgenticLoop(
        provider,
        ex,
        records,
        plan=plan,
        settings=LoopSettings(model=MODEL, workspace=str(ws)),
        prompt=PromptSources(workspace=ws),
    )
    print(
        "| K rounds | raw gap ms med / p90 | loop gap ms med / p90 | ratio (median) | loop wall ms (median) |"
    )
    print("|---|---|---|---|---|")
    try:
        for k in (5, 20):
            raw, _ = measure(fake, lambda i, k=k: run_raw(k, ws, plan, ex, provider, i), k, runs)
            lg, walls = measure(fake, lambda i, k=k: loop.run_turn(f"s-{k}-{i}", "t1", "go"), k, runs)
            ratio = statistics.median(lg) / statistics.median(raw)
            print(f"| {k} | {fmt(raw)} | {fmt(lg)} | {ratio:.2f}x | {statistics.median(walls) * 1e3:.0f} |")
        # a long session: 50 earlier turns (200 messages) before a K=5 turn; saves stay incremental
        fake.k = 1
        for t in range(50):
            loop.run_turn("s-long", f"old-{t}", "go")
        lg, walls = measure(fake, lambda i: loop.run_turn("s-long", f"new-{i}", "go"), 5, runs)
        print(f"| 5 after 200+ messages | — | {fmt(lg)} | — | {statistics.median(walls) * 1e3:.0f} |")
    finally:
        if hasattr(ex, "shutdown"):
            ex.shutdown()
        server.stop()
        if engine is not None:
            engine.close()
        for p in procs:
            p.send_signal(signal.SIGTERM)
            p.wait(10)


if __name__ == "__main__":
    main()
