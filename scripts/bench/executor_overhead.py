"""Executor overhead per call: raw handler vs the full authority pipeline (read tool, and a receipted write).

Run: .venv/bin/python scripts/bench/executor_overhead.py [--n 2000]
Prints microseconds per call and the ratio to the raw handler call, measured in the same run.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from geode.home import GeodeHome
from geode.protocol.transport import LocalTransport
from geode.records.engine import RecordEngine
from geode.records.service import StoreService
from geode.records.store_client import StoreClient
from geode.tools.executor import ToolExecutor
from geode.tools.executor_client import ExecutorClient
from geode.tools.handlers import HandlerEntry, ToolEnv
from geode.tools.plan import BoundToolPlan
from geode.tools.service import ToolService
from geode.tools.spec import EffectClass, SafetyPolicy, ToolCall, ToolContext, ToolSpec


def handler(args: dict, env: ToolEnv) -> dict:  # type: ignore[type-arg]
    return {"ok": True, "x": args.get("x")}


def _time(fn, n: int) -> float:  # type: ignore[no-untyped-def]
    samples = []
    for i in range(n):
        t0 = time.perf_counter()
        fn(i)
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples) * 1e6


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=2000)
    n = ap.parse_args().n
    tmp = Path(tempfile.mkdtemp())
    home = GeodeHome(tmp / "h").ensure()
    engine = RecordEngine.for_home(home).open()
    records = StoreClient(LocalTransport({"store": StoreService(engine)}))
    schema = {"type": "object", "properties": {"x": {"type": "integer"}}, "additionalProperties": False}
    specs = [
        ToolSpec(name="r", description="r", input_schema=schema, handler="b:h"),
        ToolSpec(
            name="w",
            description="w",
            input_schema=schema,
            handler="b:h",
            policy=SafetyPolicy(effect=EffectClass.MUTATE, resource_strategy="global:w"),
        ),
    ]
    plan = BoundToolPlan.build(specs)
    ex = ToolExecutor(
        owner="bench#1", records=records, handlers={"b:h": HandlerEntry(handler)}, default_workspace=tmp
    )
    ex.bind_plan(plan)
    client = ExecutorClient(LocalTransport({"executor": ToolService(ex)}))
    client.bind_plan(plan)
    env = ToolEnv(
        ctx=ToolContext(session_id="s", turn_id="t", step_id="st", operation_id="o"),
        workspace=tmp,
        roots=(tmp,),
        deadline_s=10,
    )

    def ctx(i: int, step: str = "st") -> ToolContext:
        return ToolContext(
            session_id=f"s{i}",
            turn_id="t",
            step_id=step,
            operation_id=f"op{i}",
            plan_hash=plan.content_hash,
            plan_generation=plan.generation,
            workspace=str(tmp),
        )

    bare = ToolExecutor(
        owner="bench#2", records=None, handlers={"b:h": HandlerEntry(handler)}, default_workspace=tmp
    )
    bare.bind_plan(plan)
    for i in range(300):  # warm-up: validators, LMDB pages, threads
        ex.execute(ctx(-i - 1), ToolCall(id="warm", name="r", input={"x": i}))
    raw = _time(lambda i: handler({"x": i}, env), n)
    pipeline = _time(
        lambda i: bare.execute(ctx(5_000_000 + i), ToolCall(id=f"c{i}", name="r", input={"x": i})), n
    )
    read = _time(lambda i: ex.execute(ctx(i), ToolCall(id=f"c{i}", name="r", input={"x": i})), n)
    read_t = _time(
        lambda i: client.execute(ctx(1_000_000 + i), ToolCall(id=f"c{i}", name="r", input={"x": i})), n
    )
    m = max(50, n // 10)
    ex.timeline.flush(120)  # the read phases' queued rows must not compete with the write phase
    from geode.records.models import ReceiptIdentity

    def raw_receipt(i: int) -> None:
        ident = ReceiptIdentity(
            session_id=f"raw{i}", turn_id="t", step_id="st", tool_name="w", fingerprint="f"
        )
        records.admit(f"raw{i}", ident, owner="bench#1", effect="mutate")
        records.commit(f"raw{i}", {"ok": True})

    raw_store = _time(raw_receipt, m)
    write = _time(
        lambda i: ex.execute(ctx(10_000_000 + i), ToolCall(id=f"w{i}", name="w", input={"x": i})), m
    )
    print(f"calls: {n} (writes: {m}); median microseconds per call")
    print(f"raw handler call            {raw:10.1f} us   1.0x")
    print(f"pipeline only (no store)    {pipeline:10.1f} us   {pipeline / raw:8.1f}x raw  (checks + thread)")
    print(
        f"executor, read tool         {read:10.1f} us   {read / raw:8.1f}x raw  (timeline rows: 2 per call)"
    )
    print(f"client→service, read tool   {read_t:10.1f} us   {read_t / raw:8.1f}x raw  (+ msgpack round trip)")
    print(
        f"executor, receipted write   {write:10.1f} us   {write / raw:8.1f}x raw  (admit + commit, LMDB sync)"
    )
    print(f"raw store admit+commit      {raw_store:10.1f} us   (baseline for the receipted write)")
    print(f"receipted write vs raw store{write / raw_store:10.2f}x")
    ex.shutdown()
    engine.close()


if __name__ == "__main__":
    main()
