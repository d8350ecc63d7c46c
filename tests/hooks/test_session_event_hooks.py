"""Session-level hook events (issue 32 item 5) at the runner: Claude Code's matchers of non-tool events
(SessionStart's source, PreCompact's trigger, Notification's type) and SessionStart's context, which a
failing hook never blocks."""

from __future__ import annotations

from typing import Any

from geode.hooks.runner import HookRunner
from geode.loop.hook_bridge import RunnerHooks


def _ctx(text: str) -> Any:
    def hook(event: str, payload: dict[str, Any], corr: dict[str, Any]) -> dict[str, Any]:
        return {"hookSpecificOutput": {"hookEventName": event, "additionalContext": text}}

    return hook


def test_session_start_matchers_match_the_source_and_the_context_comes_back() -> None:
    runner = HookRunner()
    runner.register("SessionStart", _ctx("fresh"), name="startup-only", matcher="startup")
    runner.register("SessionStart", _ctx("again"), name="resume-only", matcher="resume|compact")
    hooks = RunnerHooks(runner)
    corr = {"session_id": "s1", "turn_id": "t1"}
    assert hooks.session_start({"source": "startup"}, corr) == "fresh"
    assert hooks.session_start({"source": "resume"}, corr) == "again"
    assert hooks.session_start({"source": "compact"}, corr) == "again"


def test_a_failing_session_start_hook_never_blocks_and_the_others_still_run() -> None:
    runner = HookRunner()

    def broken(event: str, payload: dict[str, Any], corr: dict[str, Any]) -> Any:
        raise RuntimeError("boom")

    runner.register("SessionStart", broken, name="broken")
    runner.register("SessionStart", _ctx("still here"), name="ok")
    out = runner.run("SessionStart", {"source": "startup"}, {"session_id": "s1"})
    assert out.decision == "continue" and out.additional_context == "still here"
    assert out.failures and "broken" in out.failures[0]


def test_pre_compact_matches_the_trigger() -> None:
    runner = HookRunner()
    runner.register("PreCompact", lambda *a: {"decision": "block", "reason": "manual only"}, matcher="manual")
    hooks = RunnerHooks(runner)
    assert hooks.pre_compact({"trigger": "auto"}, {}).action == "continue"
    assert hooks.pre_compact({"trigger": "manual"}, {}).action == "block"
