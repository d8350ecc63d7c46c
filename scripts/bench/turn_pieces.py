"""The loop worker's fixed pieces of a turn and a round, in-process CPU per piece (issue 34, session 5).

Pieces: the turn's provider lookup (``TurnProviders.get``), a transcript append per checkpoint save (2
messages, one session), the model call's hand-off to its reused thread and back (``_interruptible`` of a
call that returns at once), a round's single tool call waited on (``run_calls`` with an executor that
answers at once), and a turn's two threads (its actor's and its body's: started and ended per turn before,
reused jobs now). CPU time of the whole process per piece (``time.process_time``), the median of
``--repeats`` runs.

Compare two checkouts by running it under each, alternating (the piece's code is whatever ``geode`` imports):

    PYTHONPATH=/tmp/old .venv/bin/python scripts/bench/turn_pieces.py
    .venv/bin/python scripts/bench/turn_pieces.py
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from geode.config_schema import GeodeConfig
from geode.config_source import ConfigSource
from geode.home import GeodeHome
from geode.loop import batch, call, reused_threads
from geode.loop.state import TurnState
from geode.loop.turn_providers import TurnProviders
from geode.sessions.transcript import TranscriptWriter
from geode.tools.spec import ToolCall, ToolContext, ToolResult


def _cpu_us(fn: Callable[[], object], n: int, repeats: int) -> float:
    fn()  # warm: threads exist, caches built
    runs = []
    for _ in range(repeats):
        t0 = time.process_time()
        for _ in range(n):
            fn()
        runs.append((time.process_time() - t0) / n * 1e6)
    return statistics.median(runs)


class _Executor:
    def execute(self, ctx: ToolContext, tool_call: ToolCall) -> ToolResult:
        return ToolResult(tool_use_id=tool_call.id, name=tool_call.name, content={"ok": True})


class _Events:
    def emit(self, kind: Any, **fields: Any) -> None:
        return None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    print(f"geode from {os.path.dirname(os.path.dirname(call.__file__))}; load {os.getloadavg()}")

    root = Path(tempfile.mkdtemp(prefix="geode-pieces-"))
    writer = TranscriptWriter(root)
    msgs = [{"role": "assistant", "content": [{"type": "text", "text": "x" * 200}]}] * 2
    count = [0]

    def save() -> None:
        writer.append("s-bench", count[0], msgs)
        count[0] += 2

    cancel = threading.Event()
    state = TurnState(session_id="s-bench", turn_id="t-bench", user_text="bench")
    ctx = ToolContext(session_id="s-bench", turn_id="t-bench", step_id="st-1", operation_id="op-1")
    job = [(ctx, ToolCall(id="c1", name="read", input={"key": "k"}))]
    executor, events = _Executor(), _Events()

    turns = getattr(reused_threads, "TURNS", None)  # None: this checkout starts a thread per job

    def turn_threads() -> None:  # the turn's actor and its body: two jobs, one after the other
        for name in ("TurnActor-bench", "turn-bench"):
            if turns is None:
                t = threading.Thread(target=lambda: None, name=name, daemon=True)
                t.start()
                t.join()
            else:
                done = threading.Event()
                turns.run_fresh(done.set, name)
                done.wait()

    os.environ.setdefault("ANTHROPIC_API_KEY", "sk-ant-bench")
    home = GeodeHome(root / "home").ensure()
    home.run_dir.mkdir(parents=True, exist_ok=True)
    providers = TurnProviders(home, "loop-1", source=ConfigSource(home, GeodeConfig.from_raw))

    pieces: dict[str, Callable[[], object]] = {
        "provider lookup per turn": lambda: providers.get("claude-opus-5-5"),
        "transcript append per save": save,
        "model call hand-off": lambda: call._interruptible(lambda: None, cancel),  # type: ignore[arg-type,return-value]
        "single tool call waited on": lambda: batch.run_calls(executor, job, state, events, 4),  # type: ignore[arg-type]
        "a turn's two threads": turn_threads,
    }
    for name, fn in pieces.items():
        print(f"  {name:28s} {_cpu_us(fn, args.n, args.repeats):8.1f} µs CPU")


if __name__ == "__main__":
    main()
