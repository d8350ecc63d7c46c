"""Budgets and guards: each ends the turn with its documented termination reason."""

from __future__ import annotations

import threading
import time
from typing import Any

from geode.loop import HookOutcome, LoopSettings, NoHooks
from geode.protocol.turns import TerminationReason as R
from geode.providers.types import ModelResponse, ProviderError, ProviderErrorKind, StopReason
from geode.testing.function_model import FunctionModel
from tests.loop.conftest import Rig, tool


def _forever(name: str = "read", vary: bool = True):
    n = {"i": 0}

    def fn(req):
        n["i"] += 1
        if req.tool_choice == "none":
            return "best final answer"
        return {"tool_calls": [tool(name, key=str(n["i"]) if vary else "same")]}

    return FunctionModel(fn)


def run(rig: Rig, provider: Any, **settings: Any):
    s = LoopSettings(model="m", **settings)
    return rig.loop(provider, settings=s).run_turn("s", "t", "go")


def test_max_rounds(rig: Rig) -> None:
    r = run(rig, _forever(), max_rounds=2, wrap_up_rounds=0)
    assert r.termination_reason == R.MAX_ROUNDS and r.rounds == 2


def test_wrap_up_forces_text_near_the_round_limit(rig: Rig) -> None:
    provider = _forever()
    r = run(rig, provider, max_rounds=3, wrap_up_rounds=2)
    assert r.termination_reason == R.FORCED_TEXT and r.text == "best final answer"
    assert provider.requests[0].tool_choice == "auto" and provider.requests[1].tool_choice == "none"
    assert "tools are off" in provider.requests[1].system[-1].text


def test_time_budget_expired(rig: Rig) -> None:
    rig.handlers["read"] = lambda a: time.sleep(0.06) or {"ok": True}
    r = run(rig, _forever(), time_budget_s=0.05, wrap_up_s=0)
    assert r.termination_reason == R.TIME_BUDGET_EXPIRED and "Time budget" in r.text


def test_cost_budget_exceeded_before_tools_run(rig: Rig) -> None:
    provider = rig.script({"tool_calls": [tool("write", text="x")], "usage": {"cost_usd": 0.6}})
    r = run(rig, provider, cost_budget_usd=0.5)
    assert r.termination_reason == R.COST_BUDGET_EXCEEDED and rig.effects == []


def test_convergence_on_three_identical_failing_batches(rig: Rig) -> None:
    r = run(rig, _forever("fail", vary=False))
    assert r.termination_reason == R.CONVERGENCE_DETECTED and r.rounds == 3
    assert r.tool_calls == 3


def test_repeated_success_without_progress(rig: Rig) -> None:
    r = run(rig, _forever("read", vary=False))
    assert r.termination_reason == R.REPEATED_SUCCESS_NO_PROGRESS and r.tool_calls == 5


def test_input_blocked(rig: Rig) -> None:
    class Block(NoHooks):
        def user_prompt_submit(self, payload, correlation):
            return HookOutcome(action="block", reason="no secrets")

    provider = rig.script("never")
    r = rig.loop(provider, hooks=Block()).run_turn("s", "t", "my password is x")
    assert r.termination_reason == R.INPUT_BLOCKED and provider.requests == []


def test_model_refusal(rig: Rig) -> None:
    r = run(rig, rig.script(ModelResponse(text="I can't", stop_reason=StopReason.REFUSAL)))
    assert r.termination_reason == R.MODEL_REFUSAL


def test_auth_failure_needs_model_action(rig: Rig) -> None:
    r = run(rig, rig.script(ProviderError(ProviderErrorKind.AUTH, "bad key")))
    assert r.termination_reason == R.MODEL_ACTION_REQUIRED and "auth" in (r.error or "")


def test_billing_error(rig: Rig) -> None:
    r = run(rig, rig.script(ProviderError(ProviderErrorKind.BILLING, "quota")))
    assert r.termination_reason == R.BILLING_ERROR


def test_retryable_failure_is_retried_within_bound(rig: Rig) -> None:
    err = ProviderError(ProviderErrorKind.RATE_LIMIT, "slow down", retry_after_s=0.01)
    r = run(rig, rig.script(err, "after retry"))
    assert r.termination_reason == R.NATURAL and r.text == "after retry"
    assert "llm_retry" in rig.sink.kinds() and "retry_wait" in rig.sink.kinds()
    r2 = rig.loop(rig.script(err, err, err), settings=LoopSettings(model="m", llm_max_retries=2)).run_turn(
        "s2", "t", "go"
    )
    assert r2.termination_reason == R.MODEL_ACTION_REQUIRED


def test_retry_after_beyond_cap_ends_turn(rig: Rig) -> None:
    err = ProviderError(ProviderErrorKind.RATE_LIMIT, "later", retry_after_s=3600)
    assert run(rig, rig.script(err)).termination_reason == R.MODEL_ACTION_REQUIRED


def test_context_exhausted(rig: Rig) -> None:
    r = run(rig, rig.script("x"), context_window_tokens=21_000)
    assert r.termination_reason == R.NATURAL  # small input fits the minimum budget
    big = "word " * 20_000
    r = rig.loop(rig.script("x"), settings=LoopSettings(model="m", context_window_tokens=21_000)).run_turn(
        "s2", "t", big
    )
    assert r.termination_reason == R.CONTEXT_EXHAUSTED


def test_provider_context_overflow_recovers_then_exhausts(rig: Rig) -> None:
    over = ProviderError(ProviderErrorKind.CONTEXT_OVERFLOW, "too long")
    assert run(rig, rig.script(over, "fits now")).text == "fits now"
    r = rig.loop(rig.script(over, over, over)).run_turn("s3", "t", "go")
    assert r.termination_reason == R.CONTEXT_EXHAUSTED


def test_user_cancelled_between_phases_and_during_streaming(rig: Rig) -> None:
    cancel = threading.Event()
    rig.handlers["read"] = lambda a: cancel.set() or {"ok": True}
    provider = _forever()
    r = rig.loop(provider).run_turn("s", "t", "go", cancel=cancel)
    assert r.termination_reason == R.USER_CANCELLED and len(provider.requests) == 1
    cancel2 = threading.Event()

    def fn(req):
        cancel2.set()
        return "a long streamed answer"

    r2 = rig.loop(FunctionModel(fn)).run_turn("s2", "t", "go", cancel=cancel2)
    assert r2.termination_reason == R.USER_CANCELLED


def test_cancel_stops_waiting_for_a_running_tool(rig: Rig) -> None:
    cancel, gate, entered = threading.Event(), threading.Event(), threading.Event()

    def slow(a: dict[str, Any]) -> dict[str, Any]:
        entered.set()
        gate.wait(10)
        return {"late": True}

    rig.handlers["read"] = slow
    threading.Thread(target=lambda: entered.wait(10) and cancel.set(), daemon=True).start()
    t0 = time.monotonic()
    r = rig.loop(rig.script({"tool_calls": [tool("read", "r1")]}, "never")).run_turn(
        "s", "t", "go", cancel=cancel
    )
    assert r.termination_reason == R.USER_CANCELLED and time.monotonic() - t0 < 5
    saved = rig.records.load_checkpoint("s").messages[-1]
    assert "cancelled_outcome_unknown" in saved["content"][0]["content"]
    gate.set()
