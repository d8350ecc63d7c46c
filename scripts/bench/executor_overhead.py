"""Executor overhead per call: raw handler vs the full authority pipeline (read tool, and a receipted write).

Run: .venv/bin/python scripts/bench/executor_overhead.py [--n 2000]
Prints microseconds per call and the ratio to the raw handler call, measured in the same run.

``--glob N`` (issue 34) instead: N ``glob_files`` calls (the built-in handler, a 22-file workspace, as the
profile's tool round) through a real ToolExecutor with the store in-process; prints the handler's CPU per
call alone, the whole call's CPU (this process: pipeline, handler, timeline writer and the in-process store)
and the store requests per call by type. Run it with PYTHONPATH=DIR (from DIR's scripts/bench) for a
baseline tree in the same minute.
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


def glob_phase(n: int) -> None:
    import os
    from collections import Counter

    from geode.tools.builtin.catalogue import builtin_specs
    from geode.tools.builtin.search import glob_files
    from geode.tools.paths import AllowedRoots, home_exclusion

    tmp = Path(tempfile.mkdtemp())
    home = GeodeHome(tmp / "h").ensure()
    os.environ["GEODE_HOME"] = str(home.root)
    ws = tmp / "ws"
    ws.mkdir()
    for i in range(22):
        (ws / f"data-{i}.txt").write_text(f"line {i}\n")
    engine = RecordEngine.for_home(home).open()
    records = StoreClient(LocalTransport({"store": StoreService(engine)}))
    sent: Counter[str] = Counter()
    call = records._call

    def counted(type_: str, body: object, **kw: object) -> dict:  # type: ignore[type-arg]
        sent[type_] += 1
        return call(type_, body, **kw)  # type: ignore[arg-type]

    records._call = counted  # type: ignore[method-assign]
    plan = BoundToolPlan.build(builtin_specs())
    ex = ToolExecutor(owner="bench#1", records=records, default_workspace=ws, roots=[ws])
    ex.bind_plan(plan)

    def one(i: int) -> None:
        c = ToolContext(
            session_id=f"s{i % 10}",
            turn_id=f"t{i}",
            step_id=f"st{i}",
            operation_id=f"op{i}",
            plan_hash=plan.content_hash,
            plan_generation=plan.generation,
            workspace=str(ws),
        )
        out = ex.execute(c, ToolCall(id=f"c{i}", name="glob_files", input={"pattern": f"data-{i % 20}.txt"}))
        assert not out.is_error, out.content

    env = ToolEnv(
        ctx=ToolContext(session_id="s", turn_id="t", step_id="st", operation_id="o"),
        workspace=ws,
        roots=AllowedRoots([ws], home_exclusion()),
        deadline_s=10,
    )
    for i in range(200):  # warm-up
        one(-i - 1)
        glob_files({"pattern": "data-3.txt"}, ToolEnv(env.ctx, env.workspace, env.roots, 10))
    ex.timeline.flush(120)
    sent.clear()
    c0 = time.process_time()
    for i in range(n):
        glob_files({"pattern": f"data-{i % 20}.txt"}, ToolEnv(env.ctx, env.workspace, env.roots, 10))
    handler = (time.process_time() - c0) / n * 1e6
    c0, t0 = time.process_time(), time.perf_counter()
    for i in range(n):
        one(i)
    ex.timeline.flush(120)
    cpu, wall = (time.process_time() - c0) / n * 1e6, (time.perf_counter() - t0) / n * 1e6
    print(f"glob_files calls: {n}; load average {os.getloadavg()}")
    print(f"handler alone               {handler:10.1f} us CPU / call")
    print(f"executor.execute + store    {cpu:10.1f} us CPU / call   {wall:10.1f} us wall / call")
    print("store requests / call       " + ", ".join(f"{t} {k / n:.2f}" for t, k in sorted(sent.items())))
    ex.shutdown()
    engine.close()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--glob", type=int, default=0, help="only the glob_files phase, this many calls")
    args = ap.parse_args()
    if args.glob:
        glob_phase(args.glob)
        return
    n = args.n
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
