"""A batch of reads only is not written ahead (issue 34 session 9): no receipt, no effect, so a crash
before the next save asks the model again and runs the reads again; one durable store write a round fewer.
A batch with any effect, or reads long after the turn's last save (``UNSAVED_READS_S``), is written ahead
as before."""

from __future__ import annotations

from typing import Any

import pytest

from geode.conversation import Message
from geode.loop import LoopSettings
from geode.loop import batch as loop_batch
from geode.loop.compaction import unanswered_tool_uses
from geode.protocol.turns import TerminationReason
from geode.testing.function_model import FunctionModel
from tests.loop.conftest import Rig, tool
from tests.loop.fakes import Crash

SEQ = LoopSettings(model="test-model", tool_parallelism=1)


def _shape(rig: Rig) -> list[tuple[int, int, bool]]:
    return [(s.base_count, len(s.new_messages), s.pending_batch is not None) for s in rig.records.saves]


def test_two_read_rounds_are_saved_with_the_turns_end(fake_rig: Rig) -> None:
    rig = fake_rig
    provider = rig.script(
        {"tool_calls": [tool("read", "r1", key="a")]}, {"tool_calls": [tool("read", "r2", key="b")]}, "done"
    )
    result = rig.loop(provider, settings=SEQ).run_turn("rna-s1", "turn-1", "read twice")
    assert result.termination_reason == TerminationReason.NATURAL and (result.rounds, result.tool_calls) == (
        3,
        2,
    )
    assert _shape(rig) == [
        (0, 1, False),
        (1, 5, False),
    ]  # the open; the end with both rounds (before: 4 saves)
    msgs = [Message.model_validate(x) for x in rig.records.load_checkpoint("rna-s1").messages]
    assert [m.role for m in msgs] == ["user", "assistant", "user", "assistant", "user", "assistant"]
    assert unanswered_tool_uses(msgs) == []


def test_an_effect_in_the_batch_is_written_ahead(fake_rig: Rig) -> None:
    rig = fake_rig
    provider = rig.script(
        {"tool_calls": [tool("read", "r1", key="a")]},
        {"tool_calls": [tool("read", "r2", key="b"), tool("write", "w", text="A")]},
        "done",
    )
    result = rig.loop(provider, settings=SEQ).run_turn("rna-s2", "turn-1", "read, then read and write")
    assert result.termination_reason == TerminationReason.NATURAL and rig.effects == ["A"]
    # the read round rides the write's pending batch, which is saved before the write is sent
    assert _shape(rig) == [(0, 1, False), (1, 3, True), (4, 2, False)]
    assert [o.tool_use_id for o in rig.records.saves[1].pending_batch.operations] == ["r2", "w"]


def test_reads_long_after_the_last_save_are_written_ahead(
    fake_rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(loop_batch, "UNSAVED_READS_S", 0.0)  # every save is "too long ago"
    rig = fake_rig
    provider = rig.script({"tool_calls": [tool("read", "r1", key="a")]}, "done")
    result = rig.loop(provider, settings=SEQ).run_turn("rna-s3", "turn-1", "read")
    assert result.termination_reason == TerminationReason.NATURAL
    assert _shape(rig) == [(0, 1, False), (1, 1, True), (2, 2, False)]  # as before session 9


def test_a_crash_after_unsaved_reads_asks_the_model_again(fake_rig: Rig) -> None:
    """Killed when the model has answered a read round that nothing saved: the store holds the turn's open;
    the resumed turn asks the model again from the prompt, runs the read again, and the session goes on."""
    rig = fake_rig

    def model(req: Any) -> Any:
        if len(req.messages) == 1:
            return {"tool_calls": [tool("read", "r", key="k")]}
        raise Crash("the worker dies before the next save")

    with pytest.raises(Crash):
        rig.loop(FunctionModel(model), settings=SEQ).run_turn("rna-s4", "turn-1", "read it")
    stored = rig.records.load_checkpoint("rna-s4")
    assert stored.state.pending_batch is None
    assert [Message.model_validate(x).role for x in stored.messages] == ["user"]  # the open only
    provider = rig.script({"tool_calls": [tool("read", "r", key="k")]}, "all done")
    result = rig.loop(provider, settings=SEQ).run_turn("rna-s4", "turn-1", "read it", resume=True)
    assert result.termination_reason == TerminationReason.NATURAL and result.text == "all done"
    assert len(provider.requests[0].messages) == 1  # asked again from the prompt
    assert [c[0] for c in rig.executor.calls] == ["read", "read"]  # the read ran again (no effect)
    restored = rig.records.load_checkpoint("rna-s4")
    msgs = [Message.model_validate(x) for x in restored.messages]
    assert unanswered_tool_uses(msgs) == [] and restored.state.pending_batch is None
    assert rig.loop(rig.script("next"), settings=SEQ).run_turn("rna-s4", "turn-2", "more").text == "next"
