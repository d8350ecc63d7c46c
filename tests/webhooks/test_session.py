"""A webhook delivery's AUTOMATION turn (geode.webhooks.session): origin "webhooks", the route's budget,
model and private workspace, a session per delivery (or one named session) keyed by the home, and the
operator's tool rule: named denylisted tools lifted and granted, computer use never."""

from __future__ import annotations

import stat
from pathlib import Path
from typing import Any

from geode.config_schema import GeodeConfig
from geode.home import GeodeHome
from geode.protocol import turns
from geode.sessions.modes import default_denylist
from geode.sessions.turn_setup import compose_turn
from geode.tools.builtin.catalogue import builtin_specs
from geode.tools.plan import BoundToolPlan, PlanRegistry
from geode.webhooks.session import route_session_id, route_turn_settings
from geode.webhooks.settings import RouteSpec

COMPUTER_ON = GeodeConfig.from_raw({"daemon": {"allow_computer_use": True}})


class Plans:
    """The plan source a tree child has (``CataloguePlans``): the executor's catalogue."""

    def __init__(self, plan: BoundToolPlan) -> None:
        self.plan, self.from_executor = plan, True

    def base(self) -> BoundToolPlan:
        return self.plan


def _route(**kw: Any) -> RouteSpec:
    return RouteSpec.model_validate(
        {"name": "github", "path": "/hooks/github", "auth": "github", "secrets": ["GH"], "prompt": "p", **kw}
    )


def _turn(home: GeodeHome, route: RouteSpec, delivery: str = "d-1", config: GeodeConfig = COMPUTER_ON) -> Any:
    catalogue = PlanRegistry().compile(builtin_specs())
    settings = route_turn_settings(
        route, delivery_id=delivery, config=config, home=home, plans=Plans(catalogue), env={}
    )
    run = turns.TurnRun(
        turn_id="t1", session_id=settings["session_id"], mode=settings["mode"], settings=settings
    )
    return settings, compose_turn(run, config, catalogue=catalogue, rules_dir=home.rules_dir)


def test_a_delivery_runs_in_automation_for_the_webhooks_child_in_a_private_workspace(tmp_path: Path) -> None:
    home = GeodeHome(tmp_path / "h").ensure()
    settings, turn = _turn(home, _route(budget_s=42, model="claude-haiku-4-5"))
    assert settings["mode"] == turn.settings.mode == "AUTOMATION" and settings["origin"] == "webhooks"
    assert turn.settings.time_budget_s == 42 and turn.settings.model == "claude-haiku-4-5"
    names = turn.plan.tool_names
    daemon = default_denylist("DAEMON", plan_tools=builtin_specs())
    assert daemon <= set(turn.settings.denied_tools) and not turn.settings.granted_tools  # allowed_tools = []
    assert "computer" not in names and "run_bash" not in names and "read_file" in names
    ws = home.root / "workspaces" / "hook-github"
    assert turn.settings.workspace == str(ws.resolve()) and stat.S_IMODE(ws.stat().st_mode) == 0o700
    assert settings["plan_hash"] == turn.plan.content_hash


def test_sessions_per_delivery_or_one_named_keyed_by_the_home(tmp_path: Path) -> None:
    home = GeodeHome(tmp_path / "h").ensure()
    other = GeodeHome(tmp_path / "h2").ensure()
    route = _route()
    first, _ = _turn(home, route, "72d3162e-cc78-11e3-81ab-4c9367dc0958")
    again, _ = _turn(home, route, "72d3162e-cc78-11e3-81ab-4c9367dc0958")
    second, _ = _turn(home, route, "d-2")
    assert first["session_id"] == again["session_id"] != second["session_id"]  # a resubmission: the same
    assert first["session_id"].startswith("s-hook-github-72d3162e-cc78-11e3-81ab-4c9367dc0958-")
    assert _turn(other, route, "d-2")[0]["session_id"] != second["session_id"]  # another home, another id
    named = _route(session="named", session_name="triage")
    one, _ = _turn(home, named, "d-1")
    two, _ = _turn(home, named, "d-2")
    assert one["session_id"] == two["session_id"] and one["session_id"].startswith("s-hook-github-n-triage-")
    hostile = route_session_id(route, "../../x y" + "z" * 500, b"k" * 32)
    assert len(hostile) <= 128 and "/" not in hostile and " " not in hostile


def test_an_operators_route_names_run_bash_and_it_runs_unasked_but_never_computer(tmp_path: Path) -> None:
    home = GeodeHome(tmp_path / "h").ensure()
    mine = tmp_path / "mine"
    route = _route(allowed_tools=["run_bash", "read_file", "computer", "schedule_job"], workspace=str(mine))
    settings, turn = _turn(home, route)
    assert set(turn.plan.tool_names) == {"run_bash", "read_file"}
    assert set(turn.settings.granted_tools) == {"run_bash", "read_file"}
    assert "computer" in turn.settings.denied_tools and "run_bash" not in turn.settings.denied_tools
    assert turn.settings.workspace == str(mine.resolve()) and mine.is_dir()
    assert set(settings["visible_tools"]) == {"run_bash", "read_file"}
