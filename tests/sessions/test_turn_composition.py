"""A turn is composed once, in geode.sessions (``compose_turn``): a session composed in this process by
``create_session`` and forwarded as control forwards it, a turn lanes forwards without a session spec, and
the loop worker's own composition give the same turn for the same mode (settings, budget, denylist, plan,
prompt); the mode's budget and denylist apply on every path."""

from __future__ import annotations

from pathlib import Path

import pytest

from actors.bus import Bus
from actors.loop_worker import LoopWorker
from actors.tree.config_sections import TreeSettings
from actors.tree.registry import ChildContext
from geode.home import GeodeHome
from geode.protocol import turns
from geode.sessions.factory import create_session
from geode.sessions.turn_setup import ComposedTurn, compose_turn
from geode.tools.plan import BoundToolPlan, PlanRegistry
from geode.tools.spec import SafetyPolicy, ToolSpec


def _spec(name: str, scope: str = "", **policy) -> ToolSpec:  # type: ignore[no-untyped-def]
    return ToolSpec(
        name=name, description=name, handler=f"builtin:{name}", scope=scope, policy=SafetyPolicy(**policy)
    )


def _catalogue(project: Path) -> BoundToolPlan:
    return PlanRegistry().compile(
        [
            _spec("read_file"),
            _spec("run_bash", allow_headless=False),
            _spec("computer"),
            _spec("proj_lookup", scope=str(project)),  # a trusted project's MCP tool: only inside it
        ]
    )


def _shape(turn: ComposedTurn) -> tuple[object, ...]:
    s, names = turn.settings, turn.plan.tool_names if turn.plan is not None else ()
    return (
        s.mode,
        s.time_budget_s,
        frozenset(s.denied_tools),
        s.allowed_tools,
        s.workspace,
        names,
        turn.prompt,
    )


@pytest.mark.parametrize("mode", ["IPC", "REPL", "DAEMON", "HEADLESS", "AUTOMATION"])
def test_every_path_composes_the_same_turn(tmp_path: Path, mode: str) -> None:
    home = GeodeHome(tmp_path / "h").ensure()
    ws = tmp_path / "ws"
    ws.mkdir()
    config = TreeSettings.from_raw({})
    catalogue = _catalogue(tmp_path / "elsewhere")
    spec = create_session(mode, home=home, env={}, workspace=ws, plan=catalogue, config=config)
    forwarded = spec.turn_settings("s1")  # what control and messengers forward to lanes
    composed = turns.TurnRun(turn_id="t1", session_id="s1", mode=mode, settings=forwarded)
    bare = turns.TurnRun(  # a turn lanes forwards without a session spec (no budget, no denylist)
        turn_id="t2", session_id="s1", mode=mode, settings={"workspace": spec.workspace, "model": spec.model}
    )
    in_process = compose_turn(composed, config, catalogue=catalogue, rules_dir=home.rules_dir)
    without_spec = compose_turn(bare, config, catalogue=catalogue, rules_dir=home.rules_dir)
    worker = LoopWorker(
        Bus("loop-1", 1, home, single_process=True),
        ChildContext("loop-1", 1, home),  # its snapshot: this home's config, the defaults as ``config``
        plan_factory=lambda: catalogue,
    )
    on_worker = worker.compose(composed)
    assert _shape(in_process) == _shape(without_spec) == _shape(on_worker)

    headless = mode in ("DAEMON", "HEADLESS", "AUTOMATION")
    settings, names = in_process.settings, in_process.plan.tool_names if in_process.plan else ()
    budget = {"DAEMON": 120.0, "HEADLESS": 120.0, "AUTOMATION": 300.0}.get(mode, 0.0)
    assert settings.time_budget_s == budget  # the mode's budget, or [loop]'s 0
    assert ("run_bash" in names, "computer" in names) == (not headless, not headless)
    assert "proj_lookup" not in names and "read_file" in names  # a project's tool only inside the project
    assert in_process.prompt.workspace == ws.resolve()


def test_the_daemon_computer_use_exception_is_read_from_the_snapshot_on_every_path(tmp_path: Path) -> None:
    home = GeodeHome(tmp_path / "h").ensure()
    config = TreeSettings.from_raw({"daemon": {"allow_computer_use": True}})
    catalogue = _catalogue(tmp_path / "p")
    spec = create_session("DAEMON", home=home, env={}, workspace=tmp_path, plan=catalogue, config=config)
    bare = turns.TurnRun(turn_id="t", session_id="s", mode="DAEMON", settings={"workspace": str(tmp_path)})
    turn = compose_turn(bare, config, catalogue=catalogue, rules_dir=home.rules_dir)
    assert "computer" in spec.visible_tools and turn.plan is not None and "computer" in turn.plan.tool_names
    assert "computer" not in turn.settings.denied_tools and "run_bash" in turn.settings.denied_tools
    (home.root / "config.toml").write_text("[daemon]\nallow_computer_use = true\n")
    unset = create_session("DAEMON", home=home, env={}, workspace=tmp_path, plan=catalogue)
    assert "computer" in unset.visible_tools  # no snapshot given: the home's, read now
    snap = create_session(
        "DAEMON", home=home, env={}, workspace=tmp_path, plan=catalogue, config=TreeSettings.from_raw({})
    )
    assert "computer" not in snap.visible_tools  # the caller's snapshot wins over the file saved since
    automation = turns.TurnRun(turn_id="a", session_id="s", mode="AUTOMATION", settings={"workspace": "/"})
    never = compose_turn(automation, config, catalogue=catalogue, rules_dir=home.rules_dir)
    assert never.plan is not None and "computer" not in never.plan.tool_names  # AUTOMATION: never
