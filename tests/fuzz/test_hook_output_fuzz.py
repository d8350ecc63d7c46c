"""Fuzz hook answers (stdout + exit status of a command hook, return values of a Python hook) through
HookRunner: never an exception to the caller, always a decision, failing closed with one log line."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from hypothesis import example, given
from hypothesis import strategies as st

from geode.hooks.config import entry
from geode.hooks.events import HookOutcome
from geode.hooks.output import HookFailed, parse_output
from geode.hooks.runner import HookRunner
from tests.fuzz.budget import fuzz, logged, values

DECISIONS = {"continue", "allow", "ask", "block"}
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=30),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=10,
)
loose = st.sampled_from(["allow", "deny", "ask", "approve", "block", ""]) | json_values
tool_input = st.dictionaries(
    st.sampled_from(["command", "timeout", "file_path", "other"]) | st.text(max_size=8),
    json_values | st.sampled_from([math.inf, -math.inf, math.nan, 1e400, 10**30]),
    max_size=4,
)
specific = st.fixed_dictionaries(
    {},
    optional={
        "hookEventName": loose,
        "permissionDecision": loose,
        "permissionDecisionReason": loose,
        "decision": st.fixed_dictionaries({}, optional={"behavior": loose, "message": loose}) | json_values,
        "updatedInput": tool_input | json_values,
        "updatedToolName": st.sampled_from(["Bash", "Read", "run_bash"]) | json_values,
        "additionalContext": loose,
    },
)
shaped = st.fixed_dictionaries(
    {},
    optional={
        "decision": loose,
        "reason": loose,
        "continue": st.booleans() | json_values,
        "stopReason": loose,
        "suppressOutput": json_values,
        "systemMessage": loose,
        "hookSpecificOutput": specific | json_values,
    },
)

odd_numbers = st.sampled_from([math.inf, -math.inf, math.nan, 1e400, -1e400, 10**30, True, 0, -1, 2.5])
rewrites = st.fixed_dictionaries(  # PreToolUse rewrites of run_bash (Bash): its timeout maps ms <-> s
    {
        "hookSpecificOutput": st.fixed_dictionaries(
            {"updatedInput": st.fixed_dictionaries({"timeout": odd_numbers})}
        )
    }
)


def _dumps(v: Any) -> str:
    return json.dumps(v)  # allow_nan: Python hooks do print Infinity/NaN, and json.loads reads them back


stdouts = st.one_of(
    st.binary(max_size=300),
    st.text(max_size=200).map(str.encode),
    json_values.map(_dumps).map(str.encode),
    shaped.map(_dumps).map(str.encode),
    rewrites.map(_dumps).map(str.encode),
    specific.map(lambda s: _dumps({"hookSpecificOutput": s})).map(str.encode),
    st.integers(1, 3000).map(lambda n: ("[" * n + "]" * n).encode()),  # nesting past json's recursion
    st.integers(1, 3000).map(lambda n: ('{"a":' * n + "1" + "}" * n).encode()),
)
statuses = st.sampled_from([0, 0, 0, 2, 1, 3, 126, 127, 255])


def _expected_ok(stdout: bytes) -> HookOutcome | None:
    """What a status-0 answer means, or None when it must fail (fail closed)."""
    text = stdout.decode("utf-8", "replace").strip()
    if not text:
        return HookOutcome()
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        return None
    if not isinstance(data, dict):
        return None
    try:
        return parse_output(data)
    except HookFailed:
        return None


@fuzz(60)
@given(stdout=stdouts, status=statuses, dialect=st.sampled_from(["geode", "claude-code"]))
@example(  # found by this fuzzer: Bash's timeout rewritten to Infinity raised OverflowError out of run()
    stdout=b'{"hookSpecificOutput": {"updatedInput": {"timeout": Infinity}}}', status=0, dialect="claude-code"
)
def test_command_hook_answers_always_decide(tmp_path: Path, stdout: bytes, status: int, dialect: str) -> None:
    out_file = tmp_path / "stdout.bin"
    out_file.write_bytes(stdout)
    r = HookRunner(cwd=str(tmp_path))
    try:
        r.add(
            entry(
                "PreToolUse",
                name="fuzzed",
                command=f"cat '{out_file}'; exit {status}",
                timeout_s=10,
                dialect=dialect,
            )
        )
        with logged("geode.hooks") as lines:
            out = r.run(
                "PreToolUse",
                {"tool_name": "run_bash", "tool_input": {"command": "true", "timeout": 5}},
                {"session_id": "s"},
            )
    finally:
        r.close()
    assert isinstance(out, HookOutcome) and out.decision in DECISIONS
    if status == 2:
        assert out.blocked and not lines.records
    elif status != 0 or _expected_ok(stdout) is None:
        assert out.blocked and "failing closed" in out.reason, out
        assert len(lines.records) == 1 and "\n" not in lines.records[0].getMessage()
    else:
        assert not lines.records
        expected = _expected_ok(stdout)
        assert expected is not None and out.decision == expected.decision


py_returns = st.one_of(
    st.none(),
    json_values,
    shaped,
    rewrites,
    specific.map(lambda s: {"hookSpecificOutput": s}),
    st.builds(object),
    st.just(HookOutcome(decision="allow")),
)


@fuzz(80)
@given(
    value=py_returns,
    fail=st.sampled_from(["closed", "open"]),
    dialect=st.sampled_from(["geode", "claude-code"]),
)
def test_python_hook_returns_always_decide(value: Any, fail: str, dialect: str) -> None:
    r = HookRunner()
    try:
        r.add(entry("PreToolUse", name="py", fn=lambda e, p, c: value, fail=fail, dialect=dialect))
        with logged("geode.hooks") as lines:
            out = r.run("PreToolUse", {"tool_name": "run_bash", "tool_input": {"command": "true"}}, {})
    finally:
        r.close()
    assert isinstance(out, HookOutcome) and out.decision in DECISIONS
    assert len(lines.records) <= 1
    if lines.records:  # the hook's answer was unusable: one line, and closed unless configured open
        assert out.failures and (out.blocked if fail == "closed" else out.decision == "continue")


@fuzz(40)
@given(data=values)
def test_parse_output_raises_only_hook_failed(data: Any) -> None:
    if not isinstance(data, dict):
        data = {"hookSpecificOutput": data}
    try:
        out = parse_output(data)
    except HookFailed:
        return
    assert out.decision in DECISIONS
