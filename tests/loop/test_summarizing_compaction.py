"""Summarizing compaction in the loop (issue 32 item 4): a session pushed past a small window gets ONE
compaction record (the model's summary) in its durable history and the next request carries the summary plus
the recent turns; a failing or timed-out summary call and a blocking PreCompact hook leave the deterministic
view and the turn goes on."""

from __future__ import annotations

import threading
from typing import Any

from geode.conversation import Message
from geode.hooks.runner import HookRunner
from geode.loop import LoopSettings
from geode.loop.hook_bridge import RunnerHooks
from geode.loop.summarize import TAG, is_record
from geode.protocol.turns import TerminationReason
from geode.providers.types import ModelRequest, ProviderError, ProviderErrorKind
from geode.testing.function_model import FunctionModel
from tests.loop.conftest import Rig

SUMMARY = "## Goal\nfind the code\n## Decisions\nharbour code is 7731\n## Files touched\n-\n## Open items\n-"
WINDOW = dict(context_window_tokens=3000, output_reserve_tokens=500, keep_recent_messages=2)


def _is_summary_call(req: ModelRequest) -> bool:
    return req.metadata.get("purpose") == "compaction"


def _model(summary: Any = SUMMARY) -> FunctionModel:
    """Answers every turn with a long text (the history grows) and a compaction request with ``summary``."""

    def fn(req: ModelRequest) -> Any:
        if _is_summary_call(req):
            if isinstance(summary, ProviderError):
                return summary
            if callable(summary):
                return summary(req)
            return summary
        return "ok " + "blah " * 400  # ~500 tokens per answer

    return FunctionModel(fn)


def _run_turns(rig: Rig, provider: FunctionModel, sid: str, n: int, **kw: Any) -> list[Any]:
    loop = rig.loop(provider, settings=LoopSettings(model="m", **WINDOW), **kw)
    return [loop.run_turn(sid, f"t{i}", f"question {i} " + "pad " * 300) for i in range(n)]


def _history(rig: Rig, sid: str) -> list[Message]:
    return [Message.model_validate(m) for m in rig.records.load_checkpoint(sid).messages]


def _turn_requests(provider: FunctionModel) -> list[ModelRequest]:
    return [r for r in provider.requests if not _is_summary_call(r)]


def test_a_session_past_the_window_carries_the_summary_and_the_recent_turns(fake_rig: Rig) -> None:
    provider = _model()
    results = _run_turns(fake_rig, provider, "s-sum", 6)
    assert all(r.termination_reason == TerminationReason.NATURAL for r in results)
    summaries = [r for r in provider.requests if _is_summary_call(r)]
    assert summaries, "the window was passed but no summary was asked"
    assert "question 0" in summaries[0].messages[0].text  # the dropped turns are what is summarized
    records = [m for m in _history(fake_rig, "s-sum") if is_record(m)]
    assert len(records) == len(summaries) and "harbour code is 7731" in records[0].text
    last = _turn_requests(provider)[-1]
    first = last.messages[0]
    assert first.role == "user" and first.text.startswith(TAG) and "harbour code is 7731" in first.text
    assert "question 5" in last.messages[-1].text  # the current turn, whole
    assert not any("question 0" in m.text for m in last.messages)  # summarized, not repeated
    assert "[system:compaction]" not in " ".join(m.text for m in last.messages)  # nothing silently dropped


def _floor_checks(rig: Rig, provider: FunctionModel, sid: str) -> None:
    assert not any(is_record(m) for m in _history(rig, sid))
    last = _turn_requests(provider)[-1]
    assert "[system:compaction]" in last.messages[0].text  # the deterministic view of today
    assert "question 5" in last.messages[-1].text


def test_a_failing_summary_call_leaves_the_deterministic_view(fake_rig: Rig) -> None:
    provider = _model(ProviderError(ProviderErrorKind.OVERLOADED, "summary backend down"))
    results = _run_turns(fake_rig, provider, "s-fail", 6)
    assert all(r.termination_reason == TerminationReason.NATURAL for r in results)
    assert any(_is_summary_call(r) for r in provider.requests)
    _floor_checks(fake_rig, provider, "s-fail")


def test_a_summary_call_that_hangs_is_bounded(fake_rig: Rig) -> None:
    release = threading.Event()

    def hang(req: ModelRequest) -> str:
        release.wait(30)
        return SUMMARY

    provider = _model(hang)
    loop = fake_rig.loop(provider, settings=LoopSettings(model="m", compaction_timeout_s=0.2, **WINDOW))
    try:
        results = [loop.run_turn("s-hang", f"t{i}", f"question {i} " + "pad " * 300) for i in range(6)]
    finally:
        release.set()
    assert all(r.termination_reason == TerminationReason.NATURAL for r in results)
    _floor_checks(fake_rig, provider, "s-hang")


def test_a_blocking_pre_compact_hook_leaves_the_deterministic_view(fake_rig: Rig) -> None:
    runner = HookRunner()
    seen: list[dict[str, Any]] = []

    def block(event: str, payload: dict[str, Any], corr: dict[str, Any]) -> dict[str, Any]:
        seen.append(payload)
        return {"decision": "block", "reason": "no summaries here"}

    runner.register("PreCompact", block, name="no-summary")
    provider = _model()
    results = _run_turns(fake_rig, provider, "s-block", 6, hooks=RunnerHooks(runner))
    assert all(r.termination_reason == TerminationReason.NATURAL for r in results)
    assert seen and seen[0]["trigger"] == "auto"
    assert not any(_is_summary_call(r) for r in provider.requests)  # blocked before the call
    _floor_checks(fake_rig, provider, "s-block")


def test_the_floor_counts_its_own_omission_note() -> None:
    """Dropping stops only when the view fits WITH the note saying what was omitted (it did not: a view one
    note over the budget ended the turn context_exhausted)."""
    from geode.loop.compaction import estimate_tokens, model_view

    answer = Message(role="assistant", content=(Message.user_text("answer " + "words " * 150).content[0],))
    history = []
    for n in ("one", "two", "three"):
        history += [Message.user_text(f"question {n} " + "pad " * 250), answer]
    history.pop()
    view = model_view(history, budget_tokens=1000, keep_recent=2)
    assert estimate_tokens(view) <= 1000 and "question three" in view[-1].text
    assert "[system:compaction]" in view[0].text


def test_a_long_single_turn_summarizes_its_older_tool_rounds(fake_rig: Rig) -> None:
    """One turn of many tool rounds passes the window: its older rounds are summarized (the request kept
    verbatim in the record), the newest round stays whole with its tool_use and tool_result together."""
    from geode.loop.compaction import unanswered_tool_uses
    from tests.loop.conftest import tool

    rounds = iter(range(1, 9))

    def fn(req: ModelRequest) -> Any:
        if _is_summary_call(req):
            return SUMMARY
        n = next(rounds, None)
        if n is None:
            return "all read"
        return {"text": f"round {n} " + "thinking " * 200, "tool_calls": [tool("read", f"c{n}", key=str(n))]}

    provider = FunctionModel(fn)
    loop = fake_rig.loop(provider, settings=LoopSettings(model="m", **WINDOW))
    result = loop.run_turn("s-long", "t1", "READ EVERYTHING please " + "pad " * 100)
    assert result.termination_reason == TerminationReason.NATURAL and result.text == "all read"
    records = [m for m in _history(fake_rig, "s-long") if is_record(m)]
    assert records and "READ EVERYTHING please" in records[-1].text  # the request survives verbatim
    last = _turn_requests(provider)[-1]
    assert last.messages[0].text.startswith(TAG)
    assert unanswered_tool_uses(list(last.messages)) == []
    assert "round 8" in " ".join(m.text for m in last.messages)  # the newest round, whole
    assert "round 1 " not in " ".join(m.text for m in last.messages)  # summarized, not repeated
