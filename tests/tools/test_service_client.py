"""The executor over a Transport: binding, execute, re-bind after a restart, unreachable executor."""

from __future__ import annotations

from geode.protocol.errors import Unavailable
from geode.protocol.transport import LocalTransport
from geode.tools.builtin.catalogue import builtin_specs
from geode.tools.executor import ToolExecutor
from geode.tools.executor_client import ExecutorClient
from geode.tools.plan import BoundToolPlan
from geode.tools.service import ToolService, bounded
from geode.tools.spec import ToolCall, ToolContext, ToolResult


def _ctx(plan: BoundToolPlan, ws, n: int = 1) -> ToolContext:  # type: ignore[no-untyped-def]
    return ToolContext(
        session_id="s",
        turn_id="t",
        step_id="st",
        operation_id=f"op{n}",
        workspace=str(ws),
        plan_hash=plan.content_hash,
        plan_generation=plan.generation,
    )


def test_bind_execute_and_rebind_after_restart(store, workspace) -> None:
    (workspace / "a.txt").write_text("hello\n")
    plan = BoundToolPlan.build(builtin_specs())
    transport = LocalTransport({"store": None})  # type: ignore[dict-item]
    first = ToolExecutor(owner="executor#1", records=store.client)
    transport.register("executor", ToolService(first))
    client = ExecutorClient(transport)
    client.bind_plan(plan)
    res = client.execute(
        _ctx(plan, workspace), ToolCall(id="c1", name="read_file", input={"file_path": "a.txt"})
    )
    assert not res.is_error and "hello" in res.content["content"]
    # the executor restarts: its plan cache is empty; the client re-binds transparently
    first.shutdown()
    second = ToolExecutor(owner="executor#2", records=store.client)
    transport.register("executor", ToolService(second))
    res = client.execute(_ctx(plan, workspace, 2), ToolCall(id="c2", name="list_dir", input={}))
    assert not res.is_error and [e["name"] for e in res.content["entries"]] == ["a.txt"]
    out = client.execute(_ctx(plan, workspace, 3), ToolCall(id="b2", name="nope"))
    assert out.tool_use_id == "b2" and out.error_type == "tool_not_in_scope"
    second.shutdown()


def test_tampered_plan_is_refused(store) -> None:
    plan = BoundToolPlan.build(builtin_specs())
    wire = plan.to_wire()
    wire["specs"] = wire["specs"][:-1]
    transport = LocalTransport({"executor": ToolService(ToolExecutor(owner="e#1", records=store.client))})
    try:
        transport.call("executor", "tool.plan.bind", wire)
    except Exception as exc:
        assert "hash" in str(exc)
    else:
        raise AssertionError("a plan whose hash does not match its specs was accepted")


class _Down:
    def call(self, *a, **k):  # type: ignore[no-untyped-def]
        raise Unavailable("executor is restarting")

    def cast(self, *a, **k):  # type: ignore[no-untyped-def]
        raise Unavailable("executor is restarting")


def test_unreachable_executor_is_an_unknown_outcome(workspace) -> None:
    plan = BoundToolPlan.build(builtin_specs())
    res = ExecutorClient(_Down()).execute(_ctx(plan, workspace), ToolCall(id="c", name="write_file"))
    assert res.error_type == "executor_unavailable" and res.executed is None
    assert res.content["outcome_uncertain"] is True


def test_oversized_results_are_bounded() -> None:
    big = ToolResult(tool_use_id="x", name="read_file", content={"text": "y" * 2_000_000})
    small = bounded(big)
    assert small.content["_truncated"] is True and len(small.content["preview"]) < 700_000
