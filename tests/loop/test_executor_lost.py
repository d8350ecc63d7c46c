"""The executor dies with a call in flight: the loop settles the call by its receipt instead of pausing the
session blindly (issue 12: sessions paused with nothing to reconcile)."""

from __future__ import annotations

from typing import Any

from geode.loop import AgenticLoop, LoopSettings
from geode.prompt import PromptSources
from geode.protocol.turns import TerminationReason
from geode.tools.receipts import uncertain_result
from geode.tools.spec import ToolCall, ToolContext, ToolResult
from tests.loop.conftest import Rig, tool
from tests.loop.fakes import Crash

SEQ = LoopSettings(model="test-model", tool_parallelism=1)


class LosingExecutor:
    """The fake executor, except that a crash point answers as ExecutorClient does on ExecutorLost."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def execute(self, ctx: ToolContext, call: ToolCall) -> ToolResult:
        try:
            return self.inner.execute(ctx, call)
        except Crash:
            if getattr(self.inner, "once", False):
                self.inner.crash = {}
            result = uncertain_result(call, "the tool executor stopped while it ran")
            assert isinstance(result.content, dict)
            return result.model_copy(update={"content": {**result.content, "operation_id": ctx.operation_id}})


def _turn(rig: Rig, session: str, crash: str) -> tuple[Any, Any]:
    rig.executor.crash = {"a": crash}
    provider = rig.script({"tool_calls": [tool("write", "a", text="A")]}, "answered")
    return _run(rig, provider, session), provider


def _run(rig: Rig, provider: Any, session: str) -> Any:
    loop = AgenticLoop(
        provider,
        LosingExecutor(rig.executor),
        rig.records,
        plan=rig.plan,
        events=rig.sink,
        settings=SEQ,
        prompt=PromptSources(workspace=rig.tmp),
    )
    return loop.run_turn(session, "turn-1", "go")


def _tool_result(provider: Any) -> str:
    return str(provider.requests[-1].messages[-1].tool_results[0].content)


def test_never_admitted_call_is_sent_again_under_its_operation_id_and_runs_once(fake_rig: Rig) -> None:
    """The executor died before admitting it: the loop sends it again (a copy of the first send that reached
    the next incarnation would be deduplicated by the same operation id's receipt)."""
    rig = fake_rig
    rig.executor.crash = {"a": "before_admit"}
    rig.executor.once = True
    provider = rig.script({"tool_calls": [tool("write", "a", text="A")]}, "answered")
    result = _run(rig, provider, "s-again")
    assert result.termination_reason == TerminationReason.NATURAL, result
    assert rig.effects == ["A"]
    assert '"written": "A"' in _tool_result(provider)
    assert [r.state.value for r in rig.records.list_receipts(session_id="s-again")] == ["committed"]


def test_a_call_lost_twice_before_admission_is_reported_not_run_and_the_turn_continues(fake_rig: Rig) -> None:
    result, provider = _turn(fake_rig, "s-none", "before_admit")
    assert result.termination_reason == TerminationReason.NATURAL, result
    assert result.text == "answered"
    assert fake_rig.effects == []
    assert "executor_restarted" in _tool_result(provider) and "did not run" in _tool_result(provider)
    assert fake_rig.records.list_receipts(session_id="s-none") == []


def test_committed_call_uses_its_stored_result(fake_rig: Rig) -> None:
    result, provider = _turn(fake_rig, "s-done", "after_commit")
    assert result.termination_reason == TerminationReason.NATURAL, result
    assert fake_rig.effects == ["A"]
    assert '"written": "A"' in _tool_result(provider)
    assert fake_rig.records.list_receipts(session_id="s-done", uncertain_only=True) == []


def test_admitted_call_pauses_and_is_listed_uncertain(fake_rig: Rig) -> None:
    result, provider = _turn(fake_rig, "s-open", "after_admit")
    assert result.termination_reason == TerminationReason.EXTERNAL_VERIFICATION_REQUIRED, result
    assert "effect_outcome_uncertain" in _tool_result(provider)
    listed = fake_rig.records.list_receipts(session_id="s-open", uncertain_only=True)
    assert [r.state.value for r in listed] == ["uncertain"]  # `geode receipts --uncertain` shows it
    op = listed[0].operation_id
    assert fake_rig.records.reconcile(op, outcome="not_applied", by="test").state.value == "reconciled"
