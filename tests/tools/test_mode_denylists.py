"""DESIGN §6 default denylists per mode, checked through the executor's policy stage."""

from __future__ import annotations

import pytest

from geode.config_schema import GeodeConfig
from geode.protocol.errors import ConfigError
from geode.tools.handlers import HandlerEntry
from tests.tools.conftest import Probe, probe_spec

# tool → modes in which the policy stage lets it through (approval aside)
EXPECTED = {
    "run_bash": {"IPC", "REPL"},
    "delegate_task": {"IPC", "REPL"},
    "computer": {"IPC", "REPL"},
    "personal_open": {"IPC", "REPL"},  # personal data, even when its spec claims headless is fine
    "read_file": {"IPC", "REPL", "DAEMON", "HEADLESS"},
    "send_message": {"IPC", "REPL", "DAEMON", "HEADLESS"},
}


class _Yes:
    def request(self, ctx, tool_name, detail, safety):  # type: ignore[no-untyped-def]
        return "y"


@pytest.mark.parametrize("mode", ["IPC", "REPL", "DAEMON", "HEADLESS"])
@pytest.mark.parametrize("tool", sorted(EXPECTED))
def test_default_denylist(make_rig, mode: str, tool: str) -> None:
    probe = Probe()
    handlers = {
        f"builtin:{n}": HandlerEntry(probe)
        for n in ("run_bash", "delegate_task", "computer", "read_file", "send_message")
    }
    rig = make_rig(
        extra_specs=(probe_spec("personal_open", data_class="personal"),),
        handlers=handlers,
        approvals=_Yes(),
    )
    args = {
        "run_bash": {"command": "touch x"},
        "delegate_task": {"task": "t"},
        "computer": {"action": "screenshot"},
        "read_file": {"file_path": "f"},
        "send_message": {"channel": "slack:C", "recipient": "u", "text": "t"},
    }.get(tool, {})
    res = rig.call(tool, args, mode=mode)
    if mode in EXPECTED[tool]:
        assert res.error_type != "tool_policy_denied", res
    else:
        assert res.error_type == "tool_policy_denied", res
        assert not probe.calls and not rig.probes["personal_open"].calls


def test_computer_daemon_exception_needs_the_literal_true(make_rig) -> None:
    probe = Probe()
    for value in ("true", 1):  # refused when the config is read (a StrictBool)
        with pytest.raises(ConfigError, match="allow_computer_use"):
            GeodeConfig.from_raw({"daemon": {"allow_computer_use": value}})
    allow = GeodeConfig.from_raw({"daemon": {"allow_computer_use": True}})
    for cfg, allowed in ((allow, True), (None, False)):
        rig = make_rig(handlers={"builtin:computer": HandlerEntry(probe)}, config=cfg)
        res = rig.call("computer", {"action": "screenshot"}, mode="DAEMON")
        assert (not res.is_error) is allowed, (cfg, res)
        assert (
            rig.call("computer", {"action": "screenshot"}, mode="HEADLESS").error_type == "tool_policy_denied"
        )
