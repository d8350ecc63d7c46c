"""A hook whose answer does not validate (a malformed decision) fails closed on deciding events with one
line naming the hook and the bad field; no traceback or AttributeError text reaches the model."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from geode.hooks.config import entry
from geode.hooks.runner import HookRunner

MALFORMED = {
    "permissionDecision 42": {"hookSpecificOutput": {"permissionDecision": 42}},
    "hookSpecificOutput a list": {"hookSpecificOutput": ["deny"]},
    "decision maybe": {"decision": "maybe", "reason": "unsure"},
    "decision not an object": {"hookSpecificOutput": {"permissionDecision": "deny", "decision": "x"}},
    "behavior 7": {"hookSpecificOutput": {"decision": {"behavior": 7}}},
    "continue a string": {"continue": "no"},
    "updatedInput a list": {"hookSpecificOutput": {"permissionDecision": "allow", "updatedInput": [1]}},
}
NEEDLES = {
    "permissionDecision 42": "hookSpecificOutput.permissionDecision",
    "hookSpecificOutput a list": "hookSpecificOutput",
    "decision maybe": "decision",
    "decision not an object": "hookSpecificOutput.decision",
    "behavior 7": "hookSpecificOutput.decision.behavior",
    "continue a string": "continue",
    "updatedInput a list": "hookSpecificOutput.updatedInput",
}


def _printer(tmp_path: Path, data: Any) -> str:
    script = tmp_path / "hook.py"
    script.write_text(f"import sys\nsys.stdin.read()\nprint({json.dumps(json.dumps(data))})\n")
    return f"{sys.executable} {script}"


def _assert_one_clean_line(text: str) -> None:
    assert "\n" not in text
    for bad in ("Traceback", "AttributeError", "object has no attribute", "File \"", "pydantic"):
        assert bad not in text, text


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_a_malformed_pre_tool_use_answer_blocks_with_one_line(make_rig, tmp_path: Path, case: str) -> None:
    command = _printer(tmp_path, MALFORMED[case])
    rig = make_rig(hooks=HookRunner([entry("PreToolUse", name="policy", command=command)]))
    res = rig.call("probe")
    assert res.error_type == "hook_blocked", res
    assert not rig.probes["probe"].calls
    error = str(res.content["error"])
    assert error.startswith(f"hook 'policy' ({command[:40]}"), error  # the command, shortened to 80
    assert ") printed an invalid decision: " in error, error
    assert NEEDLES[case] in error and "failing closed" in error, error
    _assert_one_clean_line(error)


def test_a_malformed_post_tool_use_answer_withholds_the_result(make_rig, tmp_path: Path) -> None:
    command = _printer(tmp_path, {"decision": "maybe"})
    rig = make_rig(hooks=HookRunner([entry("PostToolUse", name="post", command=command)]))
    res = rig.call("probe")
    assert res.is_error, res
    text = json.dumps(res.content)
    assert "printed an invalid decision" in text, text
    _assert_one_clean_line(str(res.content.get("error", "")))


def test_a_malformed_answer_on_a_fail_open_hook_is_ignored(make_rig, tmp_path: Path) -> None:
    command = _printer(tmp_path, MALFORMED["decision not an object"])
    rig = make_rig(hooks=HookRunner([entry("PreToolUse", name="lax", command=command, fail="open")]))
    assert not rig.call("probe").is_error
    assert rig.probes["probe"].calls


def test_a_python_hook_returning_a_malformed_dict_fails_closed() -> None:
    runner = HookRunner()
    runner.register("PreToolUse", lambda ev, p, c: {"hookSpecificOutput": {"permissionDecision": "yes"}},
                    name="py")
    out = runner.run("PreToolUse", {"tool_name": "probe", "tool_input": {}}, {"session_id": "s1"})
    assert out.blocked
    prefix = "hook 'py' returned an invalid decision: hookSpecificOutput.permissionDecision"
    assert out.reason.startswith(prefix), out.reason
    _assert_one_clean_line(out.reason)


def test_a_python_hook_that_raises_is_one_line(make_rig) -> None:
    def broken(ev: str, payload: dict[str, Any], corr: dict[str, Any]) -> None:
        raise AttributeError("'str' object has no attribute 'get'\n  File \"x.py\", line 1")

    runner = HookRunner()
    runner.register("PreToolUse", broken, name="py")
    out = runner.run("PreToolUse", {"tool_name": "probe", "tool_input": {}}, {"session_id": "s1"})
    assert out.blocked and out.reason.startswith("hook 'py' failed (raised AttributeError: ")
    assert "\n" not in out.reason


def test_valid_answers_still_decide(make_rig, tmp_path: Path) -> None:
    hso = {"hookEventName": "PreToolUse", "permissionDecision": "allow", "permissionDecisionReason": "fine"}
    allow = {"hookSpecificOutput": {**hso, "futureField": [1]}, "suppressOutput": True}
    rig = make_rig(hooks=HookRunner([entry("PreToolUse", name="ok", command=_printer(tmp_path, allow))]))
    assert not rig.call("probe").is_error
    block = {"decision": "block", "reason": "legacy no"}
    rig = make_rig(hooks=HookRunner([entry("PreToolUse", name="no", command=_printer(tmp_path, block))]))
    res = rig.call("probe")
    assert res.error_type == "hook_blocked" and "legacy no" in res.content["error"]
