"""One checkpoint save per tool round (issue 34): the pending batch is written ahead, strict, and a round's
results ride the next save. A crash between the results and that save is the crash-during-the-tools case: the
resume repairs the batch from its receipts (committed → the stored result, never re-run; a read runs again),
counts it in the turn's guards, and the session goes on. The verdict's and the turn end's timeline rows go to
the store in one request."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from geode.conversation import Message
from geode.loop import LoopSettings
from geode.loop.compaction import unanswered_tool_uses
from geode.protocol import store as m
from geode.protocol.turns import TerminationReason
from geode.testing.function_model import FunctionModel
from tests.loop.conftest import Rig, store_calls, tool
from tests.loop.fakes import Crash

SEQ = LoopSettings(model="test-model", tool_parallelism=1)


def test_a_tool_round_is_saved_once_its_results_riding_the_next_save(fake_rig: Rig) -> None:
    """Before: 2 saves a round (the pending batch, then the completed one): 8 for 3 rounds. Now 5: the turn's
    open, one pending batch a round (carrying the last round's results), the final save."""
    rig = fake_rig
    replies = [{"tool_calls": [tool("write", f"w{i}", text=f"T{i}")]} for i in range(3)]
    result = rig.loop(rig.script(*replies, "done"), settings=SEQ).run_turn("ckpt-s1", "turn-1", "write three")
    assert result.termination_reason == TerminationReason.NATURAL and result.text == "done"
    assert (result.rounds, result.tool_calls) == (4, 3) and rig.effects == ["T0", "T1", "T2"]
    shape = [(s.base_count, len(s.new_messages), s.pending_batch is not None) for s in rig.records.saves]
    assert shape == [(0, 1, False), (1, 1, True), (2, 2, True), (4, 2, True), (6, 2, False)]
    for save in rig.records.saves[2:4]:  # the results of the round before, then the batch written ahead
        first, second = (Message.model_validate(x) for x in save.new_messages)
        assert first.tool_results and second.tool_uses
        assert save.pending_batch.operations[0].tool_use_id == second.tool_uses[0].id
    restored = rig.records.load_checkpoint("ckpt-s1")
    msgs = [Message.model_validate(x) for x in restored.messages]
    assert len(msgs) == 8 and unanswered_tool_uses(msgs) == [] and restored.state.pending_batch is None


def test_a_one_round_turn_makes_four_store_requests(fake_rig: Rig, monkeypatch: pytest.MonkeyPatch) -> None:
    """Before: 9 (the completed batch's save, and the verdict's row apart from turn.ended's); then 7 (issue 34
    session 4: the turn's rows ride the open's and the final save's store write); then 5; now 4 (session 6:
    Verify lists no receipts when the pending save found none open and the batch was read-only)."""
    rig = fake_rig
    calls = store_calls(rig, monkeypatch)
    provider = rig.script({"tool_calls": [tool("read", "r1", key="k")]}, "the answer")
    assert rig.loop(provider, settings=SEQ).run_turn("ckpt-s2", "turn-1", "read").text == "the answer"
    assert calls == [  # (a session id no other test uses: a process keeps its last sessions' histories)
        m.CHECKPOINT_LOAD,  # the restore (a new session: nothing stored)
        m.CHECKPOINT_SAVE,  # the turn's open, with turn.started
        m.CHECKPOINT_SAVE,  # the pending batch
        m.CHECKPOINT_SAVE,  # the final save, holding the batch's results, verification.decided and turn.ended
    ]
    kinds = [r.event.kind for r in rig.records.read_timeline("ckpt-s2")]
    assert kinds == ["turn.started", "verification.decided", "turn.ended"]


def test_a_crash_after_the_results_before_the_next_save_is_repaired_from_receipts(fake_rig: Rig) -> None:
    """Killed when the model has answered the batch's results and nothing of it is saved yet: the write is
    not run again (its committed receipt gives the result the model saw), the read runs again (no effect),
    the turn counts its rounds as if it had not been cut, and the session goes on."""
    rig = fake_rig
    seen: list[Any] = []

    def model(req: Any) -> Any:
        if len(req.messages) == 1:
            return {"tool_calls": [tool("write", "w", text="A"), tool("read", "r", key="k")]}
        seen.append(req.messages[-1].tool_results)
        raise Crash("the worker dies before the next save")

    with pytest.raises(Crash):
        rig.loop(FunctionModel(model), settings=SEQ).run_turn("ckpt-s3", "turn-1", "write and read")
    stored = rig.records.load_checkpoint("ckpt-s3")
    assert stored.state.pending_batch is not None  # the results were never saved
    assert [Message.model_validate(x).role for x in stored.messages] == ["user", "assistant"]
    provider = rig.script("all done")
    result = rig.loop(provider, settings=SEQ).run_turn("ckpt-s3", "turn-1", "write and read", resume=True)
    assert result.termination_reason == TerminationReason.NATURAL and result.text == "all done"
    assert rig.effects == ["A"]  # the write ran once
    assert [c[0] for c in rig.executor.calls] == ["write", "read", "read"]  # only the read ran again
    again = provider.requests[0].messages[-1].tool_results
    assert [(r.tool_use_id, r.content, r.is_error) for r in again] == [
        (r.tool_use_id, r.content, r.is_error) for r in seen[0]
    ]  # the model sees what it saw before the crash: the write's stored result, the read's value
    assert (result.rounds, result.tool_calls) == (2, 2)  # as the turn that was not cut
    restored = rig.records.load_checkpoint("ckpt-s3")
    msgs = [Message.model_validate(x) for x in restored.messages]
    assert unanswered_tool_uses(msgs) == [] and restored.state.pending_batch is None
    assert rig.loop(rig.script("next"), settings=SEQ).run_turn("ckpt-s3", "turn-2", "more").text == "next"


def test_a_round_cut_during_its_tools_is_counted_once_resumed(fake_rig: Rig) -> None:
    """Before: the resumed turn's guards missed the repaired round (1 round and 0 tool calls reported for a
    turn that ran a tool round and answered)."""
    rig = fake_rig
    rig.executor.crash = {"a": "after_commit"}
    with pytest.raises(Crash):
        rig.loop(rig.script({"tool_calls": [tool("write", "a", text="A")]}), settings=SEQ).run_turn(
            "ckpt-s4", "turn-1", "go"
        )
    rig.executor.crash = {}
    result = rig.loop(rig.script("fine"), settings=SEQ).run_turn("ckpt-s4", "turn-1", "go", resume=True)
    assert result.termination_reason == TerminationReason.NATURAL and rig.effects == ["A"]
    assert (result.rounds, result.tool_calls) == (2, 1)


@pytest.mark.parametrize("cut", ["during the tools", "after the results"])
def test_a_call_refused_for_a_lone_surrogate_is_answered_by_the_resume_never_sent(
    fake_rig: Rig, cut: str
) -> None:
    """A call whose arguments hold a lone surrogate is answered ``invalid_tool_input`` and never sent. Before,
    its escaped arguments carried an operation id without a receipt, so a resume sent it to the executor."""
    rig = fake_rig
    batch = [tool("write", "a", text="A"), tool("write", "u", text="bad \ud800 text")]

    def model(req: Any) -> Any:
        if len(req.messages) == 1:
            return {"tool_calls": batch}
        raise Crash("the worker dies before the next save")

    if cut == "during the tools":
        rig.executor.crash = {"a": "after_commit"}
    with pytest.raises(Crash):
        rig.loop(FunctionModel(model), settings=SEQ).run_turn("ckpt-s5", "turn-1", "write two")
    rig.executor.crash = {}
    provider = rig.script("done")
    result = rig.loop(provider, settings=SEQ).run_turn("ckpt-s5", "turn-1", "write two", resume=True)
    assert result.termination_reason == TerminationReason.NATURAL
    assert rig.effects == ["A"] and [c[0] for c in rig.executor.calls] == ["write"]
    refused = {r.tool_use_id: r for r in provider.requests[0].messages[-1].tool_results}["u"]
    assert refused.is_error and "invalid_tool_input" in refused.content and "did not run" in refused.content
    assert result.tool_calls == 1


def test_a_batch_cut_by_a_cancel_is_saved_at_once_so_a_resume_never_sends_what_it_kept_back(
    fake_rig: Rig,
) -> None:
    """The cancel comes during the first of two writes: the second is never sent. The worker dies before the
    turn's final save; the resume must not send the second write (before, the batch's results were not
    saved on their own, so the stored pending batch had no receipt for it and the resume ran it)."""
    rig = fake_rig
    cancel = threading.Event()
    rig.handlers["write"] = lambda a: cancel.set() or {"wrote": a["text"]}
    inner_save = rig.records.save_checkpoint

    def save(body: Any) -> Any:
        if body.meta.get("done_turn"):  # the turn's final save, with its answer
            raise Crash("the worker dies at the turn's final save")
        return inner_save(body)

    rig.records.save_checkpoint = save  # type: ignore[method-assign]
    batch = [tool("write", "a", text="A"), tool("write", "b", text="B")]
    with pytest.raises(Crash):
        rig.loop(rig.script({"tool_calls": batch}, "never"), settings=SEQ).run_turn(
            "ckpt-s6", "turn-1", "write two", cancel=cancel
        )
    rig.records.save_checkpoint = inner_save  # type: ignore[method-assign]
    rig.handlers.pop("write")
    loop = rig.loop(rig.script("after"), settings=SEQ)
    result = loop.run_turn("ckpt-s6", "turn-1", "write two", resume=True)
    assert [c[1].get("text") for c in rig.executor.calls if c[0] == "write"] == ["A"]  # B never sent
    assert result.termination_reason in (TerminationReason.NATURAL, TerminationReason.USER_CANCELLED)
