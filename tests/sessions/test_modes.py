"""The mode table and create_session: defaults, denylists, the computer-use exception, settings re-read."""

from __future__ import annotations

from pathlib import Path

import pytest

from geode.config_schema import GeodeConfig
from geode.home import GeodeHome
from geode.protocol.errors import ConfigError
from geode.sessions.factory import create_session
from geode.sessions.modes import MODES, SessionMode, default_denylist
from geode.tools.spec import DataClass, SafetyPolicy, ToolSpec


def _spec(name: str, **policy) -> ToolSpec:  # type: ignore[no-untyped-def]
    return ToolSpec(name=name, description=name, handler=f"builtin:{name}", policy=SafetyPolicy(**policy))


TOOLS = [
    _spec("read_file"),
    _spec("run_bash", allow_headless=False),
    _spec("delegate_task"),
    _spec("computer"),
    _spec("calendar_list", data_class=DataClass.PERSONAL),
    _spec("write_file"),
]


def test_mode_table_matches_design() -> None:
    assert MODES[SessionMode.IPC].approvals == "forward" and MODES[SessionMode.IPC].time_budget_s is None
    assert MODES[SessionMode.REPL].approvals == "terminal" and MODES[SessionMode.REPL].time_budget_s is None
    assert MODES[SessionMode.DAEMON].approvals == "deny" and MODES[SessionMode.DAEMON].time_budget_s == 120
    headless = MODES[SessionMode.HEADLESS]
    assert headless.approvals == "deny" and headless.time_budget_s == 120
    assert MODES[SessionMode.IPC].hitl_level == 2 and MODES[SessionMode.DAEMON].hitl_level == 0
    automation = MODES[SessionMode.AUTOMATION]
    assert automation.approvals == "deny" and automation.time_budget_s == 300 and automation.headless


@pytest.mark.parametrize("mode", [SessionMode.IPC, SessionMode.REPL])
def test_interactive_modes_deny_nothing_by_default(mode: SessionMode) -> None:
    assert default_denylist(mode, plan_tools=TOOLS) == frozenset()


@pytest.mark.parametrize("mode", [SessionMode.DAEMON, SessionMode.HEADLESS, SessionMode.AUTOMATION])
def test_headless_modes_deny_bash_delegate_computer_personal(mode: SessionMode) -> None:
    denied = default_denylist(mode, plan_tools=TOOLS)
    assert {"run_bash", "delegate_task", "computer", "calendar_list"} <= denied
    assert "read_file" not in denied and "write_file" not in denied


def test_computer_use_exception_only_daemon_and_only_literal_true() -> None:
    for section in ("gateway", "daemon"):
        yes = GeodeConfig.from_raw({section: {"allow_computer_use": True}})
        assert "computer" not in default_denylist("DAEMON", config=yes, plan_tools=TOOLS)
        assert "computer" in default_denylist("HEADLESS", config=yes, plan_tools=TOOLS)
        assert "computer" in default_denylist("AUTOMATION", config=yes, plan_tools=TOOLS)
    assert "computer" in default_denylist("DAEMON", config=GeodeConfig(), plan_tools=TOOLS)
    for not_literal in ("true", 1, "yes"):  # refused when the snapshot is built: never the exception
        with pytest.raises(ConfigError, match="allow_computer_use"):
            GeodeConfig.from_raw({"gateway": {"allow_computer_use": not_literal}})


def test_create_session_rereads_config_each_time(tmp_path: Path) -> None:
    home = GeodeHome(tmp_path).ensure()
    first = create_session("IPC", home=home, env={}, workspace=tmp_path)
    assert first.model == "claude-opus-5-5" and first.provider == "anthropic"
    home.config_file.write_text('[providers]\nmodel = "gpt-6-sol"\n')
    second = create_session("IPC", home=home, env={}, workspace=tmp_path)
    assert (second.model, second.provider, second.model_origin) == ("gpt-6-sol", "openai", "config")
    env = create_session("IPC", home=home, env={"GEODE_MODEL": "glm-5.3"})
    assert env.provider == "glm"
    assert first.session_id != second.session_id


def test_create_session_budget_allowlist_and_projection(tmp_path: Path) -> None:
    home = GeodeHome(tmp_path).ensure()
    seen: dict[str, object] = {}

    def project(plan, provider, names):  # type: ignore[no-untyped-def]
        seen.update(provider=provider, names=names)
        return ("projected", provider)

    spec = create_session(
        "DAEMON",
        home=home,
        env={},
        plan=object(),
        plan_tools=TOOLS,
        project=project,
        allowed_tool_names=["read_file", "run_bash"],
        time_budget_override=30,
    )
    assert spec.time_budget_s == 30 and not spec.interactive
    assert spec.visible_tools == ("read_file",)
    assert seen == {"provider": "anthropic", "names": frozenset({"read_file"})}
    assert spec.plan == ("projected", "anthropic")
    assert not spec.permits("run_bash") and spec.permits("read_file") and not spec.permits("write_file")
    assert create_session("HEADLESS", home=home, env={}).time_budget_s == 120
    assert create_session("IPC", home=home, env={}, skip_permissions=True).skip_permissions
    assert not create_session("DAEMON", home=home, env={}, skip_permissions=True).skip_permissions


def test_bound_tool_plan_is_filtered_and_projected(tmp_path: Path) -> None:
    from geode.tools.plan import BoundToolPlan

    home = GeodeHome(tmp_path).ensure()
    plan = BoundToolPlan.build(TOOLS)
    spec = create_session("DAEMON", home=home, env={}, plan=plan)
    assert (
        spec.plan is not plan
        and "run_bash" not in spec.plan.tool_names
        and "read_file" in spec.plan.tool_names
    )
    assert spec.plan.generation == plan.generation + 1  # a derived snapshot
    ipc = create_session("IPC", home=home, env={}, plan=plan)
    assert set(ipc.plan.tool_names) == set(plan.tool_names) and ipc.plan.content_hash == plan.content_hash
