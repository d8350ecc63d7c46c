"""The per-reply tool call cap ([loop] max_tool_calls_per_reply, default 64): 200 calls in one reply run
only the first 64; every other tool_use gets an error tool_result, so the conversation stays valid; a
resume never runs the calls beyond the cap either."""

from __future__ import annotations

import json

import pytest

from geode.conversation import Message
from geode.loop import LoopSettings
from geode.loop.compaction import unanswered_tool_uses
from geode.protocol.turns import TerminationReason
from tests.loop.conftest import Rig, tool
from tests.loop.fakes import Crash

CAP_ERROR = "too many tool calls in one reply: only the first 64 run"


def test_default_cap_is_64() -> None:
    assert LoopSettings().max_tool_calls_per_reply == 64


def test_200_calls_in_one_reply_run_only_64(rig: Rig) -> None:
    calls = [tool("write", f"w{i}", text=str(i)) for i in range(200)]
    provider = rig.script({"tool_calls": calls}, "done")
    result = rig.loop(provider).run_turn("s1", "turn-1", "write a lot")
    assert result.termination_reason == TerminationReason.NATURAL
    assert sorted(rig.effects, key=int) == [str(i) for i in range(64)]  # the first 64, in parallel
    assert result.tool_calls == 64
    results = provider.requests[1].messages[-1].tool_results
    assert [r.tool_use_id for r in results] == [f"w{i}" for i in range(200)]
    assert not any(r.is_error for r in results[:64])
    for r in results[64:]:
        assert r.is_error
        body = json.loads(r.content)
        assert body["error"] == CAP_ERROR and body["error_type"] == "too_many_tool_calls"
    restored = rig.records.load_checkpoint("s1")
    msgs = [Message.model_validate(m) for m in restored.messages]
    assert unanswered_tool_uses(msgs) == []


def test_the_cap_is_configurable(rig: Rig) -> None:
    calls = [tool("read", f"r{i}", key=str(i)) for i in range(5)]
    provider = rig.script({"tool_calls": calls}, "done")
    settings = LoopSettings(model="test-model", max_tool_calls_per_reply=2)
    result = rig.loop(provider, settings=settings).run_turn("s2", "turn-1", "read")
    assert result.tool_calls == 2
    results = provider.requests[1].messages[-1].tool_results
    assert [r.is_error for r in results] == [False, False, True, True, True]
    assert "only the first 2 run" in results[2].content


def test_a_reply_at_the_cap_runs_everything(rig: Rig) -> None:
    calls = [tool("write", f"w{i}", text=str(i)) for i in range(64)]
    provider = rig.script({"tool_calls": calls}, "done")
    rig.loop(provider).run_turn("s3", "turn-1", "write")
    assert len(rig.effects) == 64
    assert not any(r.is_error for r in provider.requests[1].messages[-1].tool_results)


def test_a_resume_does_not_run_the_calls_beyond_the_cap(fake_rig: Rig) -> None:
    rig = fake_rig
    calls = [tool("write", f"w{i}", text=str(i)) for i in range(6)]
    rig.executor.crash = {"w0": "before_admit"}  # the worker dies before the first call ran
    settings = LoopSettings(model="test-model", max_tool_calls_per_reply=3, tool_parallelism=1)
    with pytest.raises(Crash):
        rig.loop(rig.script({"tool_calls": calls}), settings=settings).run_turn("s4", "turn-1", "go")
    assert rig.effects == []
    rig.executor.crash = {}
    provider = rig.script("resumed")
    rig.loop(provider, settings=settings).run_turn("s4", "turn-2", "continue")
    assert sorted(rig.effects) == ["0", "1", "2"]
    results = next(m for m in provider.requests[0].messages if m.tool_results).tool_results
    assert [r.tool_use_id for r in results] == [f"w{i}" for i in range(6)]
    assert [r.is_error for r in results] == [False, False, False, True, True, True]
    assert "only the first 3 run" in results[5].content
