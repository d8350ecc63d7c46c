"""BoundToolPlan: hash/generation lineage, filtering, projection, wire round trip, stale plans refused."""

from __future__ import annotations

import pytest

from geode.loop.settings import LoopSettings
from geode.loop.snapshot import StepSnapshot, operation_id
from geode.protocol.turns import TerminationReason
from geode.testing.function_model import FunctionModel
from geode.tools.plan import BoundToolPlan, PlanError, PlanRegistry
from geode.tools.spec import EffectClass, SafetyPolicy, ToolCall, ToolSpec
from tests.loop.conftest import Rig, tool
from tests.loop.fakes import read_spec, write_spec


def test_identical_recompile_keeps_generation_and_change_bumps_it() -> None:
    reg = PlanRegistry()
    a = reg.compile([read_spec("read"), write_spec("write")])
    b = reg.compile([write_spec("write"), read_spec("read")])  # same content, other order
    assert b is a and b.generation == 1
    changed = read_spec("read").model_copy(update={"description": "read v2"})
    c = reg.compile([changed, write_spec("write")])
    assert c.generation == 2 and c.content_hash != a.content_hash
    handler_moved = write_spec("write").model_copy(update={"handler": "mcp:srv/write"})
    d = reg.compile([changed, handler_moved])
    assert d.generation == 3
    assert reg.compile([changed, handler_moved]) is d


def test_filter_and_projection_return_new_snapshots() -> None:
    plan = BoundToolPlan.build([read_spec("read"), write_spec("write"), read_spec("computer_use")])
    assert plan.filtered() is plan
    f = plan.filtered(denied=["write"])
    assert f.tool_names == ("computer_use", "read") and f.generation == plan.generation + 1
    assert f.base_hash == plan.content_hash and plan.tool_names == ("computer_use", "read", "write")
    assert "computer_use" not in plan.projected("anthropic")
    assert "computer_use" in plan.projected("openai", source="subscription")
    schemas = plan.schemas_for("anthropic")
    assert [s.name for s in schemas] == ["read", "write"]
    allow = plan.filtered(allowed=["read"])
    assert allow.tool_names == ("read",)


def test_wire_round_trip_and_tamper_detection() -> None:
    plan = PlanRegistry().compile([read_spec("read"), write_spec("write")])
    wire = plan.to_wire()
    assert BoundToolPlan.from_wire(wire) == plan
    wire["specs"][0]["description"] = "tampered"
    with pytest.raises(PlanError):
        BoundToolPlan.from_wire(wire)


def test_effectful_tool_needs_a_resource_strategy() -> None:
    bad = ToolSpec(name="rm", description="x", handler="t:rm", policy=SafetyPolicy(effect=EffectClass.MUTATE))
    with pytest.raises(PlanError):
        BoundToolPlan.build([bad])
    with pytest.raises(PlanError):
        BoundToolPlan.build([read_spec("a"), read_spec("a")])


def test_snapshot_pins_plan_and_correlation() -> None:
    plan = BoundToolPlan.build([read_spec("read")])
    snap = StepSnapshot(
        session_id="s",
        turn_id="t",
        step_index=3,
        round_index=1,
        model="m",
        provider="p",
        adapter="a",
        plan=plan,
    )
    ctx = snap.tool_context(ToolCall(id="tu1", name="read"))
    assert ctx.step_id == "t:step-3" and ctx.plan_hash == plan.content_hash and ctx.plan_generation == 1
    assert ctx.operation_id == operation_id("s", "t", "t:step-3", "tu1") == snap.operation_id("tu1")
    assert operation_id("s", "t", "t:step-3", "tu2") != ctx.operation_id


def test_the_operation_id_memo_holds_two_turns_batches_at_the_cap_and_no_more() -> None:
    # asked 3 times a call while its batch runs; a bigger memo only kept finished calls' ids (~0.5 KiB each)
    cap = LoopSettings(model="m").max_tool_calls_per_reply
    assert 2 * cap <= (operation_id.cache_info().maxsize or 0) <= 256


def test_call_against_stale_plan_is_refused(rig: Rig) -> None:
    """The plan changes while the model is deciding: its calls carry the old plan and are refused."""
    newer = rig.registry.compile([read_spec("read"), write_spec("write"), read_spec("extra")])

    def fn(req):
        if len(req.messages) == 1:
            if hasattr(
                rig.executor, "plans"
            ):  # the real executor: it restarted and knows only the newer plan
                rig.executor.plans._plans.clear()
            rig.executor.bind_plan(newer)  # e.g. a /model switch re-projected the plan
            return {"tool_calls": [tool("write", "w", text="stale")]}
        return "gave up"

    result = rig.loop(FunctionModel(fn)).run_turn("s1", "turn-1", "go")
    assert result.termination_reason == TerminationReason.NATURAL
    assert rig.effects == []
    assert newer.generation == rig.plan.generation + 1
    tool_result = rig.sink.events  # the tool_end event carries the denial type
    ends = [e for e in tool_result if e.kind == "tool_end"]
    assert ends[0].data["error"] in ("stale_plan", "plan_not_bound")
