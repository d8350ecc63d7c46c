"""One test per check in pipeline order: an error result, the handler never ran, a timeline row."""

from __future__ import annotations

from geode.hooks.runner import HookRunner
from geode.tools.spec import ToolCall, ToolContext
from tests.tools.conftest import probe_spec


def _denied(rig, result, stage: str, error_type: str) -> None:  # type: ignore[no-untyped-def]
    assert result.is_error and result.error_type == error_type, result
    assert result.executed is False
    assert all(not p.calls for p in rig.probes.values()), "a handler ran despite the denial"
    rows = [e for e in rig.timeline() if e.kind == "tool.denied"]
    assert rows and rows[-1].payload["stage"] == stage and rows[-1].payload["error_type"] == error_type


def test_1_scope_unbound_plan(make_rig) -> None:
    rig = make_rig()
    _denied(rig, rig.call("probe", plan_hash="0" * 64), "scope", "plan_not_bound")


def test_1_scope_generation_mismatch(make_rig) -> None:
    rig = make_rig()
    _denied(rig, rig.call("probe", plan_generation=rig.plan.generation + 1), "scope", "plan_not_bound")


def test_1_scope_tool_not_in_plan(make_rig) -> None:
    rig = make_rig()
    _denied(rig, rig.call("not_a_tool"), "scope", "tool_not_in_scope")


def test_2_middleware_rewrite_lowering_safety_is_denied(make_rig) -> None:
    rig = make_rig(middleware=[lambda ctx, call: ToolCall(id=call.id, name="probe", input=call.input)])
    _denied(rig, rig.call("probe_write"), "middleware", "tool_policy_downgrade")


def test_2_middleware_rewrite_dropping_personal_data_is_denied(make_rig) -> None:
    rig = make_rig(middleware=[lambda ctx, call: ToolCall(id=call.id, name="probe", input={})])
    _denied(rig, rig.call("probe_personal"), "middleware", "privacy_classification_downgrade")


def test_3_policy_declared_denial(make_rig) -> None:
    rig = make_rig()
    res = rig.call("probe_denied")
    _denied(rig, res, "policy", "tool_policy_denied")
    assert res.content["reason"] == "declared"


def test_3_policy_headless(make_rig) -> None:
    rig = make_rig()
    res = rig.call("probe_nohead", mode="DAEMON")
    _denied(rig, res, "policy", "tool_policy_denied")
    assert res.content["reason"] == "headless"


def test_3_policy_subagent(make_rig) -> None:
    rig = make_rig()
    res = rig.call("probe_nosub", subagent_depth=1)
    _denied(rig, res, "policy", "tool_policy_denied")
    assert res.content["reason"] == "subagent"


def test_3_policy_mode_denylist_by_name(make_rig) -> None:
    # a plan that (wrongly) marks spawn_agent headless-safe is still refused in DAEMON mode by the denylist
    rig = make_rig(extra_specs=(probe_spec("spawn_agent"),))
    res = rig.call("spawn_agent", mode="HEADLESS")
    assert res.content["reason"] == "mode_denylist"
    _denied(rig, res, "policy", "tool_policy_denied")


def test_3_policy_path_outside_workspace(make_rig) -> None:
    rig = make_rig()
    res = rig.call("read_file", {"file_path": "../../outside.txt"})
    assert res.content["reason"] == "outside_roots"
    _denied(rig, res, "policy", "tool_policy_denied")


def test_4_schema(make_rig) -> None:
    rig = make_rig()
    res = rig.call("probe", {"x": "not an int"})
    _denied(rig, res, "schema", "invalid_tool_input")
    assert res.content["recoverable"] is True


def test_5_pre_tool_use_block(make_rig) -> None:
    hooks = HookRunner()
    hooks.register("PreToolUse", lambda ev, p, c: {"decision": "block", "reason": "no probes"}, name="b")
    rig = make_rig(hooks=hooks)
    res = rig.call("probe")
    _denied(rig, res, "hook", "hook_blocked")
    assert "no probes" in res.content["error"]


class _Say:
    def __init__(self, answer: str) -> None:
        self.answer = answer
        self.asked: list[str] = []

    def request(self, ctx: ToolContext, tool_name: str, detail: str, safety) -> str:  # type: ignore[no-untyped-def]
        self.asked.append(tool_name)
        return self.answer


def test_6_approval_refused(make_rig) -> None:
    rig = make_rig(approvals=_Say("n"))
    _denied(rig, rig.call("probe_cached"), "approval", "permission_denied")


def test_7_receipt_uncertain_blocks_dispatch(make_rig) -> None:
    rig = make_rig()
    ctx = rig.ctx()
    call = ToolCall(id="tu-x", name="probe_write", input={})
    from geode.tools.receipts import identity

    spec = rig.plan.get("probe_write")
    rig.store.client.admit(ctx.operation_id, identity(ctx, call, spec), owner="executor#0", effect="mutate")
    res = rig.executor.execute(ctx, call)
    assert res.error_type == "effect_outcome_uncertain" and res.content["outcome_uncertain"] is True
    assert res.executed is None
    assert not rig.probes["probe_write"].calls


def test_8_locks_busy(make_rig) -> None:
    rig = make_rig()
    held = rig.executor.locks.acquire(("global:probe",), 1)
    assert held is not None
    try:
        res = rig.call("probe_write", deadline_ms=int((__import__("time").time() + 0.3) * 1000))
    finally:
        held.release()
    assert res.error_type == "resource_busy"
    assert not rig.probes["probe_write"].calls


def test_happy_path_runs_once_and_records(make_rig) -> None:
    rig = make_rig()
    res = rig.call("probe_write", {"x": 3})
    assert not res.is_error and res.executed is True
    assert rig.probes["probe_write"].calls == [{"x": 3}]
    kinds = [e.kind for e in rig.timeline()]
    assert kinds == ["tool.called", "tool.completed"]
    receipts = rig.store.client.list_receipts(session_id="s1")
    assert [r.state.value for r in receipts] == ["committed"]


def test_send_file_outside_a_chat_turn_is_refused_before_anyone_is_asked(make_rig) -> None:
    """A terminal (IPC) turn has no chat of its own: send_file is refused before the approval prompt."""
    say = _Say("y")
    rig = make_rig(approvals=say)
    (rig.workspace / "notes.txt").write_text("hello")
    res = rig.call("send_file", {"path": "notes.txt"})
    assert res.is_error and res.error_type == "tool_policy_denied" and "own chat" in str(res.content)
    assert say.asked == []
