"""Resume repair: committed → stored result, admitted/uncertain → effect_outcome_uncertain, none → runs."""

from __future__ import annotations

import threading

import pytest

from geode.conversation import Message
from geode.loop import LoopSettings
from geode.loop.compaction import unanswered_tool_uses
from geode.protocol.turns import TerminationReason
from tests.loop.conftest import Rig, tool
from tests.loop.fakes import Crash

SEQ = LoopSettings(model="test-model", tool_parallelism=1)


def _crash_mid_batch(rig: Rig, session: str) -> None:
    batch = [tool("write", "a", text="A"), tool("write", "b", text="B"), tool("write", "c", text="C")]
    rig.executor.crash = {"b": "after_admit"}
    with pytest.raises(Crash):
        rig.loop(rig.script({"tool_calls": batch}), settings=SEQ).run_turn(session, "turn-1", "write three")
    rig.executor.crash = {}


def test_mid_batch_crash_is_repaired_without_running_anything_twice(fake_rig: Rig) -> None:
    rig = fake_rig
    _crash_mid_batch(rig, "s1")
    rig.records.owner_died("executor", 1)  # the supervisor tells the store: b's receipt becomes uncertain
    assert rig.effects == ["A"]  # a committed; b admitted then the worker died; c never began
    provider = rig.script("final answer")
    result = rig.loop(provider, settings=SEQ).run_turn("s1", "turn-1", "write three", resume=True)
    assert result.termination_reason == TerminationReason.EXTERNAL_VERIFICATION_REQUIRED  # b is unresolved
    assert result.pending_text == "final answer"
    assert rig.effects == ["A", "C"]  # a replayed from its receipt, c ran now, b not re-run
    req = provider.requests[0]
    assert unanswered_tool_uses(list(req.messages)) == []
    results = {r.tool_use_id: r for r in req.messages[-1].tool_results}
    assert list(results) == ["a", "b", "c"]
    assert not results["a"].is_error and '"written": "A"' in results["a"].content
    assert results["b"].is_error and "effect_outcome_uncertain" in results["b"].content
    assert not results["c"].is_error
    restored = rig.records.load_checkpoint("s1")
    msgs = [Message.model_validate(m) for m in restored.messages]
    assert unanswered_tool_uses(msgs) == [] and restored.state.pending_batch is None
    assert sum(1 for m in msgs if m.tool_results) == 1  # the repaired batch was saved once, in place


def test_committed_receipts_replay_and_turn_completes(fake_rig: Rig) -> None:
    rig = fake_rig
    batch = [tool("write", "a", text="A"), tool("read", "r", key="k")]
    rig.executor.crash = {"a": "after_commit"}
    with pytest.raises(Crash):
        rig.loop(rig.script({"tool_calls": batch}), settings=SEQ).run_turn("s2", "turn-1", "go")
    rig.executor.crash = {}
    provider = rig.script("all good")
    result = rig.loop(provider, settings=SEQ).run_turn("s2", "turn-1", "go", resume=True)
    assert result.termination_reason == TerminationReason.NATURAL and result.text == "all good"
    assert rig.effects == ["A"]
    assert [c[0] for c in rig.executor.calls] == ["write", "read"]  # read (no receipt) ran again after resume


def test_crash_before_any_admit_runs_the_call_normally(fake_rig: Rig) -> None:
    rig = fake_rig
    rig.executor.crash = {"a": "before_admit"}
    with pytest.raises(Crash):
        rig.loop(rig.script({"tool_calls": [tool("write", "a", text="A")]}), settings=SEQ).run_turn(
            "s3", "turn-1", "go"
        )
    rig.executor.crash = {}
    assert rig.effects == []
    result = rig.loop(rig.script("done"), settings=SEQ).run_turn("s3", "turn-1", "go", resume=True)
    assert result.termination_reason == TerminationReason.NATURAL
    assert rig.effects == ["A"]


def test_crash_between_rounds_continues_from_checkpoint(fake_rig: Rig) -> None:
    rig = fake_rig

    def fn(req):
        if len(req.messages) == 1:
            return {"tool_calls": [tool("write", "a", text="A")]}
        raise Crash("model call")

    from geode.testing.function_model import FunctionModel

    with pytest.raises(Crash):
        rig.loop(FunctionModel(fn), settings=SEQ).run_turn("s4", "turn-1", "go")
    provider = rig.script("resumed answer")
    result = rig.loop(provider, settings=SEQ).run_turn("s4", "turn-1", "go", resume=True)
    assert result.text == "resumed answer" and rig.effects == ["A"]
    assert [m.role for m in provider.requests[0].messages] == ["user", "assistant", "user"]


def test_reconciled_receipt_is_reported_not_rerun_and_events_continue_past_the_gap(fake_rig: Rig) -> None:
    rig = fake_rig
    _crash_mid_batch(rig, "s5")
    seq_before = max(e.seq for e in rig.sink.events)
    restored = rig.records.load_checkpoint("s5")
    op_b = next(o.operation_id for o in restored.state.pending_batch.operations if o.tool_use_id == "b")
    assert rig.records.owner_died("executor", 1) >= 1  # supervision: the admitted receipt becomes uncertain
    rig.records.reconcile(op_b, outcome="not_applied", by="operator", note="checked by hand")
    rig.sink.events.clear()
    provider = rig.script("final")
    result = rig.loop(provider, settings=SEQ).run_turn("s5", "turn-1", "write three", resume=True)
    assert result.termination_reason == TerminationReason.NATURAL
    assert rig.effects == ["A", "C"]
    b = next(r for r in provider.requests[0].messages[-1].tool_results if r.tool_use_id == "b")
    assert b.is_error and "effect_reconciled" in b.content and "not_applied" in b.content
    assert min(e.seq for e in rig.sink.events) > seq_before  # never reuses a number the dead one emitted


def test_an_admitted_call_still_running_in_a_live_executor_is_awaited_not_reported_unknown(
    fake_rig: Rig,
) -> None:
    """Only the worker died: the executor finishes b and commits while the resumed turn waits."""
    rig = fake_rig
    batch = [tool("write", "a", text="A"), tool("write", "b", text="B")]
    rig.executor.crash = {"b": "after_admit"}
    with pytest.raises(Crash):
        rig.loop(rig.script({"tool_calls": batch}), settings=SEQ).run_turn("s9", "turn-1", "write two")
    rig.executor.crash = {}
    op_b = next(
        r for r in rig.records.list_receipts(session_id="s9") if r.state.value == "admitted"
    ).operation_id
    late = {"content": {"written": "B-late"}, "executed": True}
    timer = threading.Timer(0.3, lambda: rig.records.commit(op_b, late))
    timer.start()
    provider = rig.script("both written")
    try:
        result = rig.loop(provider, settings=SEQ).run_turn("s9", "turn-1", "write two", resume=True)
    finally:
        timer.join()
    assert result.termination_reason == TerminationReason.NATURAL and result.text == "both written"
    results = {r.tool_use_id: r for r in provider.requests[0].messages[-1].tool_results}
    assert not results["b"].is_error and "B-late" in results["b"].content
    assert rig.effects == ["A"]  # b's handler never ran again (the fake only counts handler runs)
