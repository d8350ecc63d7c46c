"""Where the model is offered schedule_job: the turn's tool plan as every path composes it (IPC, REPL: yes;
HEADLESS (MCP) and AUTOMATION: never; DAEMON: only a chat whose binding sets allow_schedule = true), and the
plan hash the session claims is the one the loop worker compiles from the forwarded denylist."""

from __future__ import annotations

from pathlib import Path

import pytest

from actors.tree.config_sections import TreeSettings
from geode.home import GeodeHome
from geode.messengers.config import MessengerBinding
from geode.messengers.session_spec import daemon_session_spec
from geode.protocol import turns
from geode.sessions.factory import SessionSpec, create_session
from geode.sessions.turn_setup import compose_turn
from geode.tools.builtin.catalogue import builtin_specs
from geode.tools.plan import BoundToolPlan, compile_plan

TOOL = "schedule_job"


class _Plans:
    from_executor = True

    def base(self) -> BoundToolPlan:
        return compile_plan(builtin_specs())


def _offered(spec: SessionSpec, home: GeodeHome, config: TreeSettings) -> tuple[str, ...]:
    """The tools the model is offered in a turn of ``spec``'s session (what the loop worker composes)."""
    run = turns.TurnRun(
        turn_id="t1", session_id=spec.session_id, mode=spec.mode, settings=spec.turn_settings()
    )
    turn = compose_turn(run, config, catalogue=_Plans().base(), rules_dir=home.rules_dir)
    assert turn.plan is not None
    if spec.plan_hash:  # the session's claim matches what the worker compiled (no plan mismatch)
        assert turn.plan.content_hash == spec.plan_hash
    return turn.plan.tool_names


@pytest.mark.parametrize(
    ("mode", "offered"),
    [("IPC", True), ("REPL", True), ("HEADLESS", False), ("AUTOMATION", False), ("DAEMON", False)],
)
def test_schedule_job_is_offered_only_where_a_person_can_approve_a_job(
    tmp_path: Path, mode: str, offered: bool
) -> None:
    home, config = GeodeHome(tmp_path / "h").ensure(), TreeSettings.from_raw({})
    spec = create_session(mode, home=home, env={}, workspace=tmp_path, plan=_Plans().base(), config=config)
    assert (TOOL in spec.visible_tools, TOOL in _offered(spec, home, config)) == (offered, offered)
    assert (TOOL in spec.denied_tools) is (not offered)


@pytest.mark.parametrize("allow", [False, True])
def test_a_chat_is_offered_schedule_job_only_when_its_binding_allows_it(tmp_path: Path, allow: bool) -> None:
    home, config = GeodeHome(tmp_path / "h").ensure(), TreeSettings.from_raw({})
    binding = MessengerBinding(platform="telegram", channel_id="-100123", allow_schedule=allow)
    spec = daemon_session_spec(
        binding,
        home=home,
        session_id="s-chat",
        workspace=tmp_path,
        plans=_Plans(),
        env={},
        factory=lambda *a, **kw: create_session(*a, config=config, **kw),
    )
    offered = _offered(spec, home, config)
    assert (TOOL in offered, TOOL in spec.visible_tools) == (allow, allow)
    assert "run_bash" not in offered and "read_file" in offered  # the flag lifts nothing else
    narrowed = binding.model_copy(update={"allowed_tools": ["read_file"]})
    spec = daemon_session_spec(
        narrowed,
        home=home,
        session_id="s2",
        workspace=tmp_path,
        plans=_Plans(),
        env={},
        factory=lambda *a, **kw: create_session(*a, config=config, **kw),
    )
    assert TOOL not in _offered(spec, home, config)  # an allowlist without it still narrows


def test_allow_schedule_is_a_strict_boolean_and_false_by_default() -> None:
    assert MessengerBinding(platform="telegram", channel_id="1").allow_schedule is False
    with pytest.raises(ValueError, match="allow_schedule"):
        MessengerBinding(platform="telegram", channel_id="1", allow_schedule="yes")
