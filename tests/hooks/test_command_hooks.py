"""Claude-Code-format command hooks driving the executor: deny, rewrite (+ re-check), ask, exit 2, hang."""

from __future__ import annotations

import json
import time
import tomllib

from geode.hooks.config import entry, load_hooks
from geode.hooks.runner import HookRunner


def _runner(event: str, command: str, **kw) -> HookRunner:  # type: ignore[no-untyped-def]
    return HookRunner([entry(event, name=kw.pop("name", "h"), command=command, **kw)])


class _Channel:
    def __init__(self, answer: str) -> None:
        self.answer, self.asked = answer, []

    def request(self, ctx, tool_name, detail, safety):  # type: ignore[no-untyped-def]
        self.asked.append(tool_name)
        return self.answer


def test_deny_script_blocks(make_rig, scripts) -> None:
    rig = make_rig(hooks=_runner("PreToolUse", scripts["deny"]))
    res = rig.call("probe")
    assert res.error_type == "hook_blocked" and "denied by policy script" in res.content["error"]
    assert not rig.probes["probe"].calls


def test_stdin_contract_and_dialect_names(make_rig, scripts, tmp_path, monkeypatch) -> None:
    dump = tmp_path / "dump.json"
    monkeypatch.setenv("HOOK_DUMP", str(dump))
    rig = make_rig(hooks=_runner("PreToolUse", scripts["dump"], matcher="Bash", dialect="claude-code"))
    res = rig.call("run_bash", {"command": "touch hi", "timeout": 5}, mode="IPC")
    data = json.loads(dump.read_text())
    assert data["hook_event_name"] == "PreToolUse" and data["session_id"] == "s1"
    assert data["tool_name"] == "Bash" and data["tool_input"] == {"command": "touch hi", "timeout": 5000}
    assert data["cwd"] == str(rig.workspace)
    assert res.error_type == "permission_denied"  # no approval channel: run_bash needs one in IPC


def test_claude_code_rewrite_is_rechecked(make_rig, scripts, monkeypatch) -> None:
    monkeypatch.setenv("HOOK_NEW_PATH", "../../escaped.txt")
    hooks = _runner("PreToolUse", scripts["rewrite_path"], matcher="Write", dialect="claude-code")
    rig = make_rig(hooks=hooks, approvals=_Channel("y"))
    res = rig.call("write_file", {"file_path": "a.txt", "content": "x"})
    assert res.error_type == "tool_policy_denied" and res.content["reason"] == "outside_roots"
    assert not (rig.workspace / "a.txt").exists()


def test_claude_code_rewrite_applies(make_rig, scripts, monkeypatch) -> None:
    monkeypatch.setenv("HOOK_NEW_PATH", "b.txt")
    hooks = _runner("PreToolUse", scripts["rewrite_path"], matcher="Write", dialect="claude-code")
    rig = make_rig(hooks=hooks, approvals=_Channel("y"))
    res = rig.call("write_file", {"file_path": "a.txt", "content": "x"})
    assert not res.is_error, res
    assert (rig.workspace / "b.txt").read_text() == "x" and not (rig.workspace / "a.txt").exists()


def test_rewrite_into_denied_tool_is_denied(make_rig, scripts, monkeypatch) -> None:
    monkeypatch.setenv("HOOK_NEW_TOOL", "probe_denied")
    rig = make_rig(hooks=_runner("PreToolUse", scripts["rename"]))
    res = rig.call("probe")
    assert res.error_type == "tool_policy_denied" and res.content["reason"] == "declared"
    assert not rig.probes["probe"].calls and not rig.probes["probe_denied"].calls


def test_rewrite_into_weaker_tool_is_denied(make_rig, scripts, monkeypatch) -> None:
    monkeypatch.setenv("HOOK_NEW_TOOL", "probe")
    rig = make_rig(hooks=_runner("PreToolUse", scripts["rename"]))
    res = rig.call("probe_write")
    assert res.error_type == "tool_policy_downgrade"
    assert not rig.probes["probe"].calls and not rig.probes["probe_write"].calls


def test_ask_forces_a_prompt(make_rig, scripts) -> None:
    channel = _Channel("n")
    rig = make_rig(hooks=_runner("PreToolUse", scripts["ask"]), approvals=channel)
    res = rig.call("probe")  # approval "none" normally: the hook's ask forces the prompt
    assert channel.asked == ["probe"] and res.error_type == "permission_denied"
    assert not rig.probes["probe"].calls
    channel.answer = "y"
    assert not rig.call("probe").is_error and len(rig.probes["probe"].calls) == 1


def test_exit_2_blocks_with_stderr(make_rig, scripts) -> None:
    rig = make_rig(hooks=_runner("PreToolUse", scripts["exit2"]))
    res = rig.call("probe")
    assert res.error_type == "hook_blocked" and "exit-2 says no" in res.content["error"]
    assert not rig.probes["probe"].calls


def test_hanging_hook_fails_closed_after_timeout(make_rig, scripts) -> None:
    rig = make_rig(hooks=_runner("PreToolUse", scripts["hang"], timeout_s=1))
    t0 = time.monotonic()
    res = rig.call("probe")
    assert time.monotonic() - t0 < 5
    assert res.error_type == "hook_blocked" and "timed out" in res.content["error"]
    assert not rig.probes["probe"].calls


def test_crash_and_garbage_fail_closed_or_open(make_rig, scripts) -> None:
    for name in ("crash", "garbage"):
        rig = make_rig(hooks=_runner("PreToolUse", scripts[name]))
        assert rig.call("probe").error_type == "hook_blocked"
        rig = make_rig(hooks=_runner("PreToolUse", scripts[name], fail="open"))
        assert not rig.call("probe").is_error


def test_post_tool_use_additional_context(make_rig, scripts) -> None:
    rig = make_rig(hooks=_runner("PostToolUse", scripts["context"]))
    res = rig.call("probe")
    assert not res.is_error and res.additional_context == "ctx from hook"


def test_post_tool_use_withholds_result(make_rig, scripts) -> None:
    rig = make_rig(hooks=_runner("PostToolUse", scripts["withhold"]))
    res = rig.call("probe_write", {"x": 1})
    assert res.error_type == "hook_blocked" and res.content["blocked_by_hook"] is True
    assert len(rig.probes["probe_write"].calls) == 1  # the effect happened; only the result is withheld
    receipt = rig.store.client.list_receipts(session_id="s1")[0]
    assert receipt.state.value == "committed" and receipt.result["error_type"] == "hook_blocked"


def test_stop_hook_block_becomes_instruction(scripts) -> None:
    runner = _runner("Stop", scripts["stop_block"])
    out = runner.run("Stop", {"stop_hook_active": False}, {"session_id": "s1"})
    assert out.decision == "block" and out.instruction == "tests are still failing; fix them"


def test_toml_configuration(scripts) -> None:
    cfg = tomllib.loads(
        f"""
[[hooks.PreToolUse]]
matcher = "Bash"
command = "{scripts["exit2"]}"
timeout = 3
fail = "open"
dialect = "claude-code"
"""
    )
    [h] = load_hooks(cfg)
    assert (h.matcher, h.timeout_s, h.fail, h.dialect) == ("Bash", 3.0, "open", "claude-code")
    runner = HookRunner([h])
    out = runner.run("PreToolUse", {"tool_name": "run_bash", "tool_input": {"command": "ls"}}, {})
    assert out.blocked
    assert not runner.run("PreToolUse", {"tool_name": "read_file", "tool_input": {}}, {}).blocked
