"""The record store's own CPU per durable write, without the bus and the commit (issue 34).

What the store child does for each write of a tool round once the frame is decoded: a ``tool.called`` and a
``tool.completed`` timeline row (redact and bound the payload, hash it, the LMDB puts) and a checkpoint save
with the round's two new messages and a 32-observation cognitive state (fingerprint, the state record, the
puts); and a ``store.turn.put`` (a turn going running) through the store's handler, its reply made. The
writes are applied in one LMDB write transaction that is then aborted (no fsync), on this thread; CPU is
``time.thread_time`` over ``--n`` writes of each kind, the best of ``--repeat``.

With ``--old DIR`` (``git archive <rev> geode actors | tar -x -C DIR``) the same is measured for that code in
a child process, alternating with this checkout's, so the baseline is beside the figure in one run.

    .venv/bin/python scripts/bench/store_write_cpu.py [--n 2000] [--repeat 5] [--old DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
FILES = "\n".join(f"src/pkg/module_{i}.py" for i in range(40))[:500]


def writes(n: int) -> tuple[list[Any], list[Any]]:
    """``n`` rounds' timeline rows (two per round) and checkpoint saves (one per round)."""
    from geode.records.models import CheckpointSave, PendingBatch, PendingOperation, TimelineEvent

    rows, saves = [], []
    cognitive = {"goal": "find the files", "observations": [f"observation {j} " * 18 for j in range(32)]}
    meta = {"mode": "IPC", "workspace": "/home/u/project", "origin": "cli", "title": "find", "turn_id": "t1"}
    for i in range(n):
        call = {
            "tool_name": "glob_files",
            "tool_use_id": f"toolu_{i:020d}",
            "operation_id": f"op-{i:032x}",
            "turn_id": "t1",
            "step_id": f"s{i}",
            "mode": "IPC",
            "arguments": {"pattern": "**/*.py", "path": "."},
        }
        done = {**call, "status": "ok", "error_type": None, "executed": True, "summary": FILES}
        for kind, payload in (("tool.called", call), ("tool.completed", done)):
            rows.append(
                TimelineEvent(session_id="s1", event_id=f"{i}:{kind}", kind=kind, ts=1.0, payload=payload)
            )
        pending = PendingBatch(
            turn_id="t1",
            step_id=f"s{i}",
            operations=(
                PendingOperation(tool_use_id=f"toolu_{i}", operation_id=f"op{i}", name="glob_files"),
            ),
        )
        use = {"type": "tool_use", "id": f"toolu_{i}", "name": "glob_files", "input": {"pattern": "**/*.py"}}
        result = {"type": "tool_result", "tool_use_id": f"toolu_{i}", "content": FILES, "is_error": False}
        messages = [
            {"role": "assistant", "content": [use], "metadata": {}},
            {"role": "user", "content": [result], "metadata": {}},
        ]
        saves.append(
            CheckpointSave(
                session_id="s1",
                seq=i + 1,
                base_count=2 * i,
                new_messages=messages,
                cognitive_state=cognitive,
                guard_counters={"turn_id": "t1", "round_index": i, "tool_calls": i, "elapsed_s": 0.5},
                pending_batch=pending if i % 2 == 0 else None,
                meta=meta,
            )
        )
    return rows, saves


def measure(n: int, repeat: int) -> dict[str, float]:
    """µs of CPU per write of each kind (best of ``repeat``), this process's code."""
    from geode.home import GeodeHome
    from geode.records.engine import RecordEngine
    from geode.records.timeline import bounded_payload

    engine = RecordEngine.for_home(GeodeHome(Path(tempfile.mkdtemp(prefix="store-cpu-"))).ensure()).open()
    rows, saves = writes(n)
    best = {k: float("inf") for k in ("timeline row", "checkpoint save", "save via handler", "turn put")}
    try:
        for _ in range(repeat):
            with engine.renv.write_scope() as env:
                txn = env.begin(write=True)
                try:
                    t0 = time.thread_time()
                    for ev in rows:
                        engine.timeline._append(
                            txn, ev, bounded_payload(ev.payload, engine.timeline.max_payload)
                        )
                    t1 = time.thread_time()
                    for save in saves:
                        engine.checkpoints._save(txn, save)
                    t2 = time.thread_time()
                    via = handler_saves(engine, env, txn, saves)
                    puts = turn_puts(engine, env, txn, n)
                finally:
                    txn.abort()
            best["timeline row"] = min(best["timeline row"], (t1 - t0) / len(rows) * 1e6)
            best["checkpoint save"] = min(best["checkpoint save"], (t2 - t1) / len(saves) * 1e6)
            best["save via handler"] = min(best["save via handler"], via)
            best["turn put"] = min(best["turn put"], puts)
    finally:
        engine.close()
    return best


def handler_saves(engine: Any, env: Any, txn: Any, saves: list[Any]) -> float:
    """µs of CPU per ``store.checkpoint.save`` through the store's handler, the save decoded from msgpack as
    a frame's body is (another session than the direct saves'), each write applied at once in a child of
    ``txn`` on this thread, the reply made."""
    import msgpack

    from geode.protocol import store as m
    from geode.protocol.envelope import Envelope
    from geode.protocol.later import Later
    from geode.protocol.transport import Request
    from geode.records.service import StoreService

    def submit(fn: Any) -> Later:
        later, child = Later(), env.begin(write=True, parent=txn)
        later.resolve(fn(child))
        child.commit()
        return later

    service = StoreService(engine)
    real = engine.writer.submit
    engine.writer.submit = submit
    reqs = []
    for save in saves:
        body = msgpack.unpackb(msgpack.packb({**save.model_dump(mode="json"), "session_id": "s2"}), raw=False)
        reqs.append(Request(Envelope(type=m.CHECKPOINT_SAVE, body={}), m.SaveCheckpoint.model_validate(body)))
    out: list[Any] = []
    handle: Any = service.handle
    try:
        t0 = time.thread_time()
        for req in reqs:
            handle(req).then(lambda ok, value: out.append(ok))
        spent = (time.thread_time() - t0) / len(reqs) * 1e6
    finally:
        engine.writer.submit = real
    assert len(out) == len(reqs) and all(out), out[:3]
    return spent


def turn_puts(engine: Any, env: Any, txn: Any, n: int) -> float:
    """µs of CPU per ``store.turn.put`` (running, over a stored queued record) through the store's handler:
    the write applied at once on this thread in ``txn`` (the writer's ``submit`` replaced), the reply made."""
    from geode.protocol import store as m
    from geode.protocol.envelope import Envelope
    from geode.protocol.later import Later
    from geode.protocol.transport import Request
    from geode.records.service import StoreService

    def submit(fn: Any) -> Later:
        later, child = Later(), env.begin(write=True, parent=txn)
        later.resolve(fn(child))
        child.abort()
        return later

    engine.writer.submit = submit
    service = StoreService(engine)
    base = {"session_id": "s1", "input": {"text": "find the files " * 8}, "settings": {"model": "m" * 40}}
    engine.turns._put(txn, m.PutTurn(turn_id="t-put", state="queued", **base))
    put = m.PutTurn(turn_id="t-put", state="running", worker="loop-1", incarnation=2, **base)
    req = Request(Envelope(type=m.TURN_PUT, body={}), put)
    out: list[Any] = []
    t0 = time.thread_time()
    handle: Any = service.handle  # a put's handler returns a Later
    for _ in range(n):
        handle(req).then(lambda ok, value: out.append(value))
    spent = (time.thread_time() - t0) / n * 1e6
    assert len(out) == n and all(isinstance(v, m.TurnReply | dict) for v in out), out[:1]
    return spent


def in_child(code: Path, n: int, repeat: int) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": str(code)}
    out = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--child", "--n", str(n), "--repeat", str(repeat)],
        cwd=code,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    figures: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return figures


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=2, help="alternations of this checkout and --old")
    ap.add_argument("--old", type=Path)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(measure(args.n, args.repeat)))
        return
    print(f"store CPU per write, no bus, no commit ({args.n} of each, best of {args.repeat})")
    print(f"  load average at the start: {os.getloadavg()}")
    codes = {"this checkout": ROOT, **({f"old ({args.old})": args.old.resolve()} if args.old else {})}
    for _ in range(args.rounds):
        for label, code in codes.items():
            got = in_child(code, args.n, args.repeat)
            print(f"  {label:40s} " + "   ".join(f"{k} {v:6.1f} us" for k, v in got.items()))
    print(f"  load average at the end: {os.getloadavg()}")


if __name__ == "__main__":
    main()
