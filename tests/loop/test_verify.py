"""Verify: structural checks, hooks (accept / revise / escalate) within the repair budget, opt-in judge."""

from __future__ import annotations

from typing import Any

from geode.hooks.events import HookOutcome as RunnerOutcome
from geode.hooks.runner import HookRunner
from geode.loop import HookOutcome, LoopSettings, VerifySettings
from geode.loop.hook_bridge import RunnerHooks
from geode.protocol.turns import TerminationReason
from geode.providers.types import ProviderError, ProviderErrorKind
from geode.records.models import SessionStatus
from geode.testing.function_model import FunctionModel
from tests.loop.conftest import Rig


class AlwaysRevise:
    def __init__(self) -> None:
        self.payloads: list[dict[str, Any]] = []

    def user_prompt_submit(self, payload, correlation):
        return HookOutcome()

    def post_verify(self, payload, correlation):
        self.payloads.append(payload)
        return HookOutcome(action="revise", instruction="add the units")

    def stop(self, payload, correlation):
        return HookOutcome(action="finalize")


def test_post_verify_revise_runs_at_most_two_repairs_then_escalates(rig: Rig) -> None:
    hooks = AlwaysRevise()
    provider = rig.script("v1", "v2", "v3", "v4")
    result = rig.loop(provider, hooks=hooks).run_turn("s1", "turn-1", "compute")
    assert result.termination_reason == TerminationReason.EXTERNAL_VERIFICATION_REQUIRED
    assert result.text == "" and result.pending_text == "v3"
    assert len(provider.requests) == 3 and result.verify_attempts == 2
    assert [p["verify_attempt"] for p in hooks.payloads] == [0, 1, 2]
    assert "add the units" in provider.requests[1].messages[-1].text
    dyn = provider.requests[1].system[-1].text
    assert "verification_continuation" in dyn and "add the units" in dyn
    assert rig.records.load_checkpoint("s1").state.status == SessionStatus.PAUSED


def test_real_hook_runner_block_means_revise_then_accept(rig: Rig) -> None:
    runner = HookRunner()
    calls: list[int] = []

    def post_verify(event, payload, correlation):
        calls.append(payload["verify_attempt"])
        if payload["verify_attempt"] == 0:
            return RunnerOutcome(decision="block", instruction="cite the source")
        return None

    runner.register("PostVerify", post_verify)
    provider = rig.script("first", "second with source")
    result = rig.loop(provider, hooks=RunnerHooks(runner)).run_turn("s2", "turn-1", "q")
    runner.close()
    assert result.termination_reason == TerminationReason.NATURAL
    assert result.text == "second with source" and calls == [0, 1]


def test_empty_turn_is_revised_by_default_policy(rig: Rig) -> None:
    provider = rig.script("", "now an answer")
    result = rig.loop(provider).run_turn("s3", "turn-1", "q")
    assert result.text == "now an answer" and result.verify_attempts == 1


def test_judge_is_off_by_default_and_its_outage_never_withholds(rig: Rig) -> None:
    provider = rig.script("answer")
    assert rig.loop(provider).run_turn("s4", "turn-1", "q").text == "answer"
    assert len(provider.requests) == 1
    down = FunctionModel.script([ProviderError(ProviderErrorKind.OVERLOADED, "judge down")])
    settings = LoopSettings(model="m", verify=VerifySettings(judge=True, judge_model="judge-m"))
    result = rig.loop(rig.script("answer 2"), settings=settings, judge_provider=down).run_turn("s5", "t", "q")
    assert result.termination_reason == TerminationReason.NATURAL and result.text == "answer 2"
    assert down.requests[0].model == "judge-m"


def test_judge_failure_revises(rig: Rig) -> None:
    judge = FunctionModel.script(['{"passed": false, "score": 0.2}', '{"passed": true, "score": 0.9}'])
    settings = LoopSettings(model="m", verify=VerifySettings(judge=True))
    provider = rig.script("weak", "strong")
    result = rig.loop(provider, settings=settings, judge_provider=judge).run_turn("s6", "t", "q")
    assert result.text == "strong" and result.verify_attempts == 1 and len(judge.requests) == 2


def test_judge_timeout_does_not_withhold(rig: Rig) -> None:
    import threading

    hold = threading.Event()
    slow = FunctionModel(lambda req: hold.wait(5) and '{"passed": false}')
    settings = LoopSettings(model="m", verify=VerifySettings(judge=True, judge_timeout_s=0.2))
    result = rig.loop(rig.script("answer"), settings=settings, judge_provider=slow).run_turn("s7", "t", "q")
    hold.set()
    assert result.termination_reason == TerminationReason.NATURAL and result.text == "answer"
    assert any(e.kind == "verify" and e.data["action"] == "accept" for e in rig.sink.events)


def test_stop_hook_continue_and_prompt_rewrite_through_the_runner(rig: Rig) -> None:
    runner = HookRunner()
    stops: list[int] = []

    def stop(event, payload, correlation):
        stops.append(payload["verify_attempt"])
        return RunnerOutcome(decision="block", instruction="one more check") if len(stops) == 1 else None

    runner.register("Stop", stop)
    runner.register(
        "UserPromptSubmit", lambda e, p, c: RunnerOutcome(updates={"prompt": p["prompt"].upper()})
    )
    provider = rig.script("first", "checked")
    result = rig.loop(provider, hooks=RunnerHooks(runner)).run_turn("s8", "t", "shout")
    runner.close()
    assert provider.requests[0].messages[0].text == "SHOUT"
    assert result.text == "checked" and stops == [0, 1] and result.verify_attempts == 1
    assert "one more check" in provider.requests[1].messages[-1].text
