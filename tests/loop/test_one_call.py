"""A round's single tool call is waited on without a Future (issue 34, session 5): geode/loop/one_call.py
hands the outcome back through a SimpleQueue, with the cancel rule of a batch (ask the executor to stop,
await the real outcome for the grace, else report it unknown)."""

from __future__ import annotations

import threading
from concurrent.futures import _base
from typing import Any

import pytest

from geode.loop.one_call import await_one
from geode.tools.spec import ToolCall, ToolResult
from tests.loop.conftest import Rig, tool

K = 6


def test_a_turn_of_single_call_rounds_builds_no_future(
    fake_rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    built: list[int] = []
    init = _base.Future.__init__

    def counted(self: Any) -> None:
        built.append(1)
        init(self)

    monkeypatch.setattr(_base.Future, "__init__", counted)
    replies = [{"tool_calls": [tool("read", f"r{i}", key=f"k{i}")]} for i in range(K)]
    result = fake_rig.loop(fake_rig.script(*replies, "done")).run_turn("s-one", "turn-1", "read six")
    assert result.text == "done"
    saved = fake_rig.records.load_checkpoint("s-one")
    assert saved is not None and saved.state.message_count == 2 * K + 2
    results = [m for m in saved.messages if m["metadata"].get("origin") == "tool_results"]
    assert len(results) == K and all(not m["content"][0].get("is_error") for m in results)
    assert built == [], f"{len(built)} Futures for {K} single-call rounds (one a round before)"


def _call() -> ToolCall:
    return ToolCall(id="c1", name="read", input={})


def test_a_cancel_asks_the_executor_once_then_gets_the_real_outcome() -> None:
    cancel, release, asked = threading.Event(), threading.Event(), []
    result = ToolResult(tool_use_id="c1", name="read", content="finished after the cancel")

    def job() -> ToolResult:
        release.wait(30)
        return result

    def on_cancel() -> None:
        asked.append(1)
        release.set()  # the executor stops the call: it answers

    cancel.set()
    assert await_one(job, _call(), cancel, on_cancel, 10.0) is result
    assert asked == [1]


def test_a_call_still_running_after_the_grace_is_unknown() -> None:
    cancel, release = threading.Event(), threading.Event()
    cancel.set()
    stuck: Any = lambda: release.wait(30)  # noqa: E731
    out = await_one(stuck, _call(), cancel, lambda: None, 0.1)
    release.set()
    assert (out.is_error, out.error_type, out.tool_use_id) == (True, "cancelled_outcome_unknown", "c1")


def test_the_jobs_error_is_raised_on_the_turns_thread() -> None:
    err = RuntimeError("handler bug")

    def job() -> ToolResult:
        raise err

    with pytest.raises(RuntimeError) as caught:
        await_one(job, _call(), threading.Event(), lambda: None, 1.0)
    assert caught.value is err
