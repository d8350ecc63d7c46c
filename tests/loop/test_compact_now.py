"""The chat's /compact as a turn (``compact_now``): the whole history is summarized in one call and stored as
one record, no user message is added and the model is not asked for an answer; a failed summary stores
nothing and says so; a re-run of the same turn id stores nothing twice; an empty session has nothing to
compact; a PreCompact hook sees ``trigger: "manual"`` and can block it."""

from __future__ import annotations

from typing import Any

import pytest

from geode.conversation import Message
from geode.hooks.runner import HookRunner
from geode.loop import LoopSettings
from geode.loop.hook_bridge import RunnerHooks
from geode.loop.summarize import TAG, is_record
from geode.protocol.turns import TerminationReason
from geode.providers.types import ModelRequest, ProviderError, ProviderErrorKind
from geode.testing.function_model import FunctionModel
from tests.loop.conftest import Rig

SUMMARY = "## Goal\nthe user asked twice\n## Decisions\n-\n## Files touched\n-\n## Open items\n-"


def _model(summary: Any = SUMMARY) -> FunctionModel:
    def fn(req: ModelRequest) -> Any:
        if req.metadata.get("purpose") == "compaction":
            return summary
        return "answer to " + req.messages[-1].text[-40:]

    return FunctionModel(fn)


def _history(rig: Rig, sid: str) -> list[Message]:
    return [Message.model_validate(m) for m in rig.records.load_checkpoint(sid).messages]


def test_compact_now_summarizes_the_whole_session_once(fake_rig: Rig) -> None:
    provider = _model()
    loop = fake_rig.loop(provider, settings=LoopSettings(model="m"))
    loop.run_turn("s-c", "t0", "first question")
    loop.run_turn("s-c", "t1", "second question")
    compact = LoopSettings(model="m", compact_now=True)
    out = loop.run_turn("s-c", "t2", "/compact", settings=compact)
    assert out.termination_reason == TerminationReason.NATURAL
    assert out.text.startswith("Compacted: 4 messages summarized")
    history = _history(fake_rig, "s-c")
    assert len(history) == 5 and is_record(history[-1]) and "the user asked twice" in history[-1].text
    assert not any(m.text == "/compact" for m in history)  # the command is no message of the session
    assert loop.run_turn("s-c", "t2", "/compact", settings=compact).text == out.text  # a re-run: stored once
    assert len(_history(fake_rig, "s-c")) == 5
    loop.run_turn("s-c", "t3", "third question")
    last = [r for r in provider.requests if r.metadata.get("purpose") != "compaction"][-1]
    assert len(last.messages) == 1 and last.messages[0].text.startswith(TAG)  # the summary + the prompt
    assert "third question" in last.messages[0].text and "first question" not in last.messages[0].text
    again = loop.run_turn("s-c", "t4", "/compact", settings=compact)
    assert again.text.startswith("Compacted: 2 messages summarized")  # only what followed the summary


def test_a_failed_summary_stores_nothing_and_an_empty_session_has_nothing(fake_rig: Rig) -> None:
    broken = _model(ProviderError(ProviderErrorKind.OVERLOADED, "upstream down"))
    loop = fake_rig.loop(broken, settings=LoopSettings(model="m"))
    compact = LoopSettings(model="m", compact_now=True)
    assert loop.run_turn("s-e", "t0", "/compact", settings=compact).text.startswith("Nothing to compact")
    loop.run_turn("s-f", "t0", "a question")
    out = loop.run_turn("s-f", "t1", "/compact", settings=compact)
    assert out.termination_reason == TerminationReason.NATURAL
    assert out.text.startswith("Not compacted (failed: ") and "deterministic view" in out.text
    assert not any(is_record(m) for m in _history(fake_rig, "s-f"))


def test_pre_compact_sees_a_manual_trigger_and_may_block(fake_rig: Rig) -> None:
    runner = HookRunner()
    seen: list[dict[str, Any]] = []

    def block(event: str, payload: dict[str, Any], corr: dict[str, Any]) -> dict[str, Any]:
        seen.append(payload)
        return {"decision": "block", "reason": "no summaries here"}

    runner.register("PreCompact", block, name="no-summary")
    provider = _model()
    loop = fake_rig.loop(provider, settings=LoopSettings(model="m"), hooks=RunnerHooks(runner))
    loop.run_turn("s-b", "t0", "a question")
    out = loop.run_turn("s-b", "t1", "/compact", settings=LoopSettings(model="m", compact_now=True))
    assert seen == [{"trigger": "manual", "custom_instructions": ""}]
    assert out.text.startswith("Not compacted (blocked by PreCompact: no summaries here)")
    assert not any(r.metadata.get("purpose") == "compaction" for r in provider.requests)  # never asked
    assert not any(is_record(m) for m in _history(fake_rig, "s-b"))


def test_a_compaction_turn_cut_after_its_record_answers_the_same_when_run_again(
    fake_rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The worker dies after the record is saved, before the turn's end: the re-run (same turn id) stores no
    second record and still says what was compacted."""
    import geode.loop.agent as agent

    provider = _model()
    loop = fake_rig.loop(provider, settings=LoopSettings(model="m"))
    loop.run_turn("s-k", "t0", "a question")
    real = agent.finish_turn

    def dies(*a: Any, **kw: Any) -> Any:
        monkeypatch.setattr(agent, "finish_turn", real)
        raise SystemExit("killed")

    monkeypatch.setattr(agent, "finish_turn", dies)
    compact = LoopSettings(model="m", compact_now=True)
    with pytest.raises(SystemExit):
        loop.run_turn("s-k", "t1", "/compact", settings=compact)
    assert sum(is_record(m) for m in _history(fake_rig, "s-k")) == 1
    out = loop.run_turn("s-k", "t1", "/compact", settings=compact)
    assert out.text.startswith("Compacted: 2 messages summarized")
    assert sum(is_record(m) for m in _history(fake_rig, "s-k")) == 1
    assert sum(r.metadata.get("purpose") == "compaction" for r in provider.requests) == 1
