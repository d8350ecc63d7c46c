"""HookRunner: Python callables, composition of rewrites, observation hooks never decide, dialect mapping."""

from __future__ import annotations

import threading

import pytest

from geode.hooks.config import entry, load_hooks
from geode.hooks.events import HookOutcome
from geode.hooks.runner import HookRunner
from geode.protocol.errors import ConfigError


def test_callables_compose_rewrites_and_context() -> None:
    r = HookRunner()
    r.register(
        "PreToolUse",
        lambda e, p, c: HookOutcome(updates={"tool_input": {"a": 1}}, additional_context="one"),
        name="first",
    )
    r.register(
        "PreToolUse",
        lambda e, p, c: {
            "hookSpecificOutput": {
                "updatedInput": {"b": p["tool_input"]["a"] + 1},
                "additionalContext": "two",
            }
        },
        name="second",
    )
    out = r.run("PreToolUse", {"tool_name": "x", "tool_input": {"z": 0}}, {"session_id": "s"})
    assert out.updates["tool_input"] == {"z": 0, "a": 1, "b": 2}
    assert out.additional_context == "one\ntwo" and out.decision == "continue"


def test_first_block_stops_the_chain() -> None:
    seen = []
    r = HookRunner()
    r.register("PreToolUse", lambda e, p, c: {"decision": "block", "reason": "no"}, name="a")
    r.register("PreToolUse", lambda e, p, c: seen.append(1), name="b")
    assert r.run("PreToolUse", {"tool_name": "x"}, {}).blocked and seen == []


def test_callable_crash_and_timeout_fail_closed_or_open() -> None:
    def boom(e, p, c):  # type: ignore[no-untyped-def]
        raise RuntimeError("bug")

    gate = threading.Event()
    r = HookRunner()
    r.register("PreToolUse", boom, name="boom")
    assert r.run("PreToolUse", {"tool_name": "x"}, {}).blocked
    r2 = HookRunner()
    r2.register("PreToolUse", lambda e, p, c: gate.wait(10), name="slow", timeout_s=0.2, fail="open")
    out = r2.run("PreToolUse", {"tool_name": "x"}, {})
    gate.set()
    assert not out.blocked and out.failures and "timed out" in out.failures[0]


def test_observation_hooks_never_decide() -> None:
    ran = threading.Event()

    def observer(e, p, c):  # type: ignore[no-untyped-def]
        ran.set()
        return {"decision": "block", "reason": "ignored"}

    r = HookRunner()
    r.register("SessionEnd", observer, name="obs")
    r.register("ToolExecEnded", lambda e, p, c: 1 / 0, name="broken")
    assert r.run("SessionEnd", {"reason": "done"}, {}).decision == "continue"
    assert r.run("ToolExecEnded", {"tool_name": "x"}, {}).decision == "continue"
    assert ran.wait(5)
    r.close()


def test_matcher_and_claude_code_dialect() -> None:
    got = []
    r = HookRunner(
        [
            entry(
                "PreToolUse",
                name="cc",
                matcher="Edit|Write",
                dialect="claude-code",
                fn=lambda e, p, c: got.append(p["tool_name"]),
            )
        ]
    )
    r.run("PreToolUse", {"tool_name": "edit_file", "tool_input": {}}, {})
    r.run("PreToolUse", {"tool_name": "read_file", "tool_input": {}}, {})
    # callables see GEODE names; the matcher sees Claude Code names
    assert got == ["edit_file"]


def test_stop_and_post_verify_instruction_and_halt() -> None:
    r = HookRunner()
    r.register(
        "PostVerify", lambda e, p, c: {"continue": False, "stopReason": "operator said stop"}, name="h"
    )
    out = r.run("PostVerify", {"passed": False}, {})
    assert out.halt and out.reason == "operator said stop"


def test_config_errors_are_clear() -> None:
    with pytest.raises(ConfigError, match="unknown hook event"):
        load_hooks({"hooks": {"PreToolUze": [{"command": "true"}]}})
    with pytest.raises(ConfigError, match="unknown field"):
        load_hooks({"hooks": {"PreToolUse": [{"command": "true", "matchr": "x"}]}})
    with pytest.raises(ConfigError, match="fail must be"):
        load_hooks({"hooks": {"Stop": [{"command": "true", "fail": "maybe"}]}})


def test_user_prompt_submit_plain_stdout_is_context() -> None:
    r = HookRunner(load_hooks({"hooks": {"UserPromptSubmit": [{"command": "echo today is Tuesday"}]}}))
    out = r.run("UserPromptSubmit", {"prompt": "hi"}, {"session_id": "s"})
    assert out.additional_context == "today is Tuesday" and not out.blocked


def test_claude_code_settings_json_runs_unchanged(tmp_path, scripts) -> None:  # type: ignore[no-untyped-def]
    import json as _json

    settings = {
        "hooks": {
            "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": scripts["deny"]}]}],
            "Notification": [{"hooks": [{"type": "command", "command": "true"}]}],
            "SomethingNew": [{"hooks": [{"type": "command", "command": "true"}]}],
        }
    }
    path = tmp_path / ".claude" / "settings.json"
    path.parent.mkdir()
    path.write_text(_json.dumps(settings))
    entries = load_hooks({"hooks": {"claude_settings": [".claude/settings.json"]}}, base_dir=tmp_path)
    assert [(e.event.value, e.dialect, e.timeout_s) for e in entries] == [
        ("PreToolUse", "claude-code", 60.0),
        ("Notification", "claude-code", 60.0),
    ]
    r = HookRunner(entries)
    assert r.run("PreToolUse", {"tool_name": "run_bash", "tool_input": {"command": "ls"}}, {}).blocked
    assert not r.run("PreToolUse", {"tool_name": "read_file", "tool_input": {}}, {}).blocked


def test_observer_backlog_is_bounded_and_close_is_safe(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import geode.hooks.runner as runner_mod

    monkeypatch.setattr(runner_mod, "MAX_OBSERVER_BACKLOG", 3)
    gate = threading.Event()
    r = HookRunner(observers=1)
    r.register("SessionEnd", lambda e, p, c: gate.wait(5), name="slow")
    for _ in range(10):
        r.run("SessionEnd", {}, {})
    assert r.dropped_observations == 7
    gate.set()
    r.close()
    assert r.run("SessionEnd", {}, {}).decision == "continue"  # after close: still no error
