"""The executor dies with calls in flight: ``Bus.fail_pending`` ends the wait at once, the client never
re-sends, an effectful call becomes ``effect_outcome_uncertain``, a read ``executor_restarted``."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from actors.bus import Bus
from geode.home import GeodeHome
from geode.protocol import runtime
from geode.protocol import tools as m
from geode.protocol.transport import Request
from geode.tools.builtin.catalogue import builtin_specs
from geode.tools.executor_client import ExecutorClient, ExecutorLost
from geode.tools.plan import BoundToolPlan
from geode.tools.spec import ToolCall, ToolContext, ToolResult


class HangingExecutor:
    """Binds plans; ``tool.execute`` of ``run_bash``/``read_file`` blocks until released, others answer."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.executes: list[str] = []
        self.entered = threading.Semaphore(0)

    def handle(self, request: Request) -> Any:
        if request.type == runtime.PING:
            return {"name": "executor", "incarnation": 1}
        if request.type == m.PLAN_BIND:
            return {"content_hash": "x", "generation": 0, "tools": 0}
        body = request.body
        assert isinstance(body, m.ToolExecute)
        self.executes.append(body.call.id)
        if body.call.name in ("run_bash", "read_file"):
            self.entered.release()
            self.release.wait(30)
        return ToolResult(tool_use_id=body.call.id, name=body.call.name, content={"ok": True})


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[tuple[Bus, HangingExecutor, ExecutorClient, BoundToolPlan]]:
    home = GeodeHome(tmp_path / "h").ensure()
    fake = HangingExecutor()
    server, client = Bus("executor", 1, home).start(), Bus("loop-1", 1, home).start()
    server.serve("executor", fake, concurrency=4)
    plan = BoundToolPlan.build(builtin_specs())
    ex = ExecutorClient(client.transport)
    ex.bind_plan(plan)
    try:
        yield client, fake, ex, plan
    finally:
        fake.release.set()
        client.stop()
        server.stop()


def _ctx(plan: BoundToolPlan, op: str) -> ToolContext:
    return ToolContext(
        session_id="s",
        turn_id="t",
        step_id="st",
        operation_id=op,
        plan_hash=plan.content_hash,
        plan_generation=plan.generation,
    )


def _in_thread(fn: Any) -> tuple[threading.Thread, dict[str, Any]]:
    box: dict[str, Any] = {}
    th = threading.Thread(target=lambda: box.update(out=fn(), t=time.monotonic()), daemon=True)
    th.start()
    return th, box


def test_in_flight_calls_fail_fast_and_are_not_resent(pair) -> None:  # type: ignore[no-untyped-def]
    client, fake, ex, plan = pair
    bash = ToolCall(id="c1", name="run_bash", input={"command": "sleep 30"})
    read = ToolCall(id="c2", name="read_file", input={"file_path": "a"})
    t1, b1 = _in_thread(lambda: ex.execute(_ctx(plan, "op-1"), bash))
    t2, b2 = _in_thread(lambda: ex.execute(_ctx(plan, "op-2"), read))
    assert fake.entered.acquire(timeout=5) and fake.entered.acquire(timeout=5)
    t0 = time.monotonic()
    assert client.fail_pending("executor", ExecutorLost("executor#1 exited (killed by SIGKILL)")) == 2
    t1.join(5)
    t2.join(5)
    effect, reread = b1["out"], b2["out"]
    assert b1["t"] - t0 < 1.0 and b2["t"] - t0 < 1.0
    assert effect.error_type == "effect_outcome_uncertain" and effect.executed is None
    assert effect.content["outcome_uncertain"] is True and effect.content["operation_id"] == "op-1"
    assert "geode reconcile" in effect.content["error"]
    assert reread.error_type == "executor_restarted" and reread.content["recoverable"] is True
    assert sorted(fake.executes) == ["c1", "c2"]  # nothing was re-sent
    # a call sent afterwards goes through normally
    later = ex.execute(_ctx(plan, "op-3"), ToolCall(id="c3", name="write_file", input={}))
    assert not later.is_error and fake.executes[-1] == "c3"


def test_fail_pending_leaves_other_targets_alone(pair) -> None:  # type: ignore[no-untyped-def]
    client, _, _, _ = pair
    assert client.fail_pending("store", ExecutorLost("nothing there")) == 0
    assert client.transport.call("executor", runtime.PING, timeout_s=5)["name"] == "executor"
