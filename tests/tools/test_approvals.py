"""Approvals: y, n, a (not for personal data), timeout, disconnect, shutdown, one prompt at a time."""

from __future__ import annotations

import threading

import pytest

from geode.config_schema import GeodeConfig
from geode.hooks.runner import HookRunner
from geode.protocol.errors import ConfigError


class Channel:
    """Answers from a script; ``gate`` (if set) holds every prompt until the test releases it."""

    def __init__(self, *answers: str, gate: threading.Event | None = None, raise_exc: bool = False) -> None:
        self.answers = list(answers)
        self.asked: list[str] = []
        self.gate = gate
        self.raise_exc = raise_exc
        self.prompting = threading.Event()
        self.concurrent = 0
        self.max_concurrent = 0
        self._mu = threading.Lock()

    def request(self, ctx, tool_name, detail, safety):  # type: ignore[no-untyped-def]
        with self._mu:
            self.concurrent += 1
            self.max_concurrent = max(self.max_concurrent, self.concurrent)
        try:
            self.asked.append(tool_name)
            self.prompting.set()
            if self.gate is not None:
                self.gate.wait(30)
            if self.raise_exc:
                raise ConnectionError("origin went away")
            return self.answers.pop(0) if self.answers else "n"
        finally:
            with self._mu:
                self.concurrent -= 1


def test_yes_runs_once_and_asks_again(make_rig) -> None:
    ch = Channel("y", "y")
    rig = make_rig(approvals=ch)
    assert not rig.call("probe_cached").is_error
    assert not rig.call("probe_cached").is_error
    assert ch.asked == ["probe_cached", "probe_cached"]
    assert len(rig.probes["probe_cached"].calls) == 2


def test_no_denies(make_rig) -> None:
    rig = make_rig(approvals=Channel("n"))
    res = rig.call("probe_cached")
    assert res.error_type == "permission_denied" and res.content["approval"] == "n"
    assert not rig.probes["probe_cached"].calls


def test_always_is_remembered_for_the_session_only(make_rig) -> None:
    ch = Channel("a", "n")
    rig = make_rig(approvals=ch)
    assert not rig.call("probe_cached").is_error
    assert not rig.call("probe_cached").is_error  # no second prompt
    assert ch.asked == ["probe_cached"]
    assert rig.call("probe_cached", session_id="s2").error_type == "permission_denied"  # other session asks


def test_always_refused_for_personal_data(make_rig) -> None:
    ch = Channel("a", "n")
    rig = make_rig(approvals=ch)
    assert not rig.call("probe_personal").is_error
    assert rig.call("probe_personal").error_type == "permission_denied"
    assert ch.asked == ["probe_personal", "probe_personal"]


def test_timeout_denies(make_rig) -> None:
    gate = threading.Event()
    rig = make_rig(approvals=Channel("y", gate=gate), approval_timeout_s=0.3)
    try:
        res = rig.call("probe_cached")
    finally:
        gate.set()
    assert res.error_type == "permission_denied" and res.content["approval"] == "timeout"
    assert not rig.probes["probe_cached"].calls


def test_disconnect_denies(make_rig) -> None:
    rig = make_rig(approvals=Channel(raise_exc=True))
    res = rig.call("probe_cached")
    assert res.content["approval"] == "disconnected" and not rig.probes["probe_cached"].calls


def test_shutdown_denies_pending_prompt(make_rig) -> None:
    gate = threading.Event()
    ch = Channel("y", gate=gate)
    rig = make_rig(approvals=ch)
    out = {}
    t = threading.Thread(target=lambda: out.setdefault("r", rig.call("probe_cached")))
    t.start()
    assert ch.prompting.wait(5)
    rig.executor.shutdown()
    t.join(5)
    gate.set()
    assert out["r"].content["approval"] == "shutdown" and not rig.probes["probe_cached"].calls


def test_modes_without_a_person_deny(make_rig) -> None:
    ch = Channel("y")
    rig = make_rig(approvals=ch)
    res = rig.call("probe_cached", mode="DAEMON")
    assert res.content["approval"] == "no_person" and ch.asked == []
    res = rig.call("probe_cached", mode="HEADLESS", origin="messengers")
    assert res.content["approval"] == "no_person" and ch.asked == []


def test_a_daemon_turn_from_a_bound_chat_asks_in_that_chat(make_rig) -> None:
    ch = Channel("n")
    rig = make_rig(approvals=ch)
    res = rig.call("probe_cached", mode="DAEMON", origin="messengers")
    assert len(ch.asked) == 1 and res.is_error and not rig.probes["probe_cached"].calls


def test_handler_cannot_start_before_the_decision(make_rig) -> None:
    gate = threading.Event()
    ch = Channel("y", gate=gate)
    rig = make_rig(approvals=ch)
    out = {}
    t = threading.Thread(target=lambda: out.setdefault("r", rig.call("probe_cached")))
    t.start()
    assert ch.prompting.wait(5)
    assert not rig.probes["probe_cached"].started.wait(0.3)  # prompt pending: nothing ran
    gate.set()
    t.join(5)
    assert not out["r"].is_error and rig.probes["probe_cached"].started.is_set()


def test_one_prompt_at_a_time_and_later_call_sees_always(make_rig) -> None:
    gate = threading.Event()
    ch = Channel("a", "n", "n", gate=gate)
    rig = make_rig(approvals=ch)
    results = []
    threads = [
        threading.Thread(target=lambda: results.append(rig.call("probe_cached", step_id="batch")))
        for _ in range(3)
    ]
    for t in threads:
        t.start()
    assert ch.prompting.wait(5)
    gate.set()
    for t in threads:
        t.join(10)
    assert ch.max_concurrent == 1 and ch.asked == ["probe_cached"]
    assert all(not r.is_error for r in results) and len(rig.probes["probe_cached"].calls) == 3


def test_permission_request_hook_runs_before_the_prompt(make_rig) -> None:
    ch = Channel("y")
    hooks = HookRunner()
    hooks.register(
        "PermissionRequest", lambda e, p, c: {"hookSpecificOutput": {"permissionDecision": "deny"}}
    )
    rig = make_rig(approvals=ch, hooks=hooks)
    res = rig.call("probe_cached")
    assert res.content["approval"] == "hook_deny" and ch.asked == []
    hooks2 = HookRunner()
    hooks2.register(
        "PermissionRequest", lambda e, p, c: {"hookSpecificOutput": {"permissionDecision": "allow"}}
    )
    rig2 = make_rig(approvals=ch, hooks=hooks2)
    assert not rig2.call("probe_cached").is_error and ch.asked == []


def test_computer_in_daemon_only_with_literal_true(make_rig, monkeypatch) -> None:
    monkeypatch.delenv("DISPLAY", raising=False)
    with pytest.raises(ConfigError, match="allow_computer_use"):  # "true" is refused when the config is read
        GeodeConfig.from_raw({"daemon": {"allow_computer_use": "true"}})
    rig = make_rig()  # the default: no computer use in DAEMON
    assert rig.call("computer", {"action": "screenshot"}, mode="DAEMON").error_type == "tool_policy_denied"
    rig = make_rig(config=GeodeConfig.from_raw({"daemon": {"allow_computer_use": True}}))
    res = rig.call("computer", {"action": "screenshot"}, mode="DAEMON")
    assert res.error_type == "tool_unavailable" and "unavailable" in res.content["error"]  # passed every gate
    assert rig.call("computer", {"action": "screenshot"}, mode="HEADLESS").error_type == "tool_policy_denied"
