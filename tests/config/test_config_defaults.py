"""Every documented default of config/geode.toml, uncommented, changes nothing: the code reads the same."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from actors.bus.endpoints import Endpoints
from actors.executor import executor_from_config
from actors.lanes import lanes_config
from actors.tree.children import child_names, tree_specs
from actors.tree.config_sections import TreeSettings
from actors.tree.registry import ChildContext
from actors.tree.spec import TreeConfig
from geode.config_schema import GeodeConfig
from geode.config_source import ConfigSource
from geode.control.settings import IDLE_TIMEOUT_S, QUEUE_MAX
from geode.home import GeodeHome
from geode.hooks.config import load_hooks
from geode.loop.settings import VerifySettings
from geode.protocol import turns
from geode.providers.selection import resolve_settings
from geode.records.settings import StoreConfig
from geode.sessions.modes import default_denylist
from geode.sessions.turn_setup import turn_settings
from geode.tools.mcp.config import load_mcp_servers
from geode.tools.policy import computer_allowed_in_daemon
from tests.config.config_kit import uncommented, uncommented_text

MODELS = ("claude-opus-5-5", "gpt-6-sol", "glm-5.3", "openrouter/openrouter/free")


def _homes(tmp_path: Path) -> tuple[GeodeHome, GeodeHome]:
    empty, full = GeodeHome(tmp_path / "empty").ensure(), GeodeHome(tmp_path / "full").ensure()
    full.config_file.write_text(uncommented_text())
    return empty, full


def test_the_uncommented_file_sets_keys() -> None:
    cfg = uncommented()
    assert len(cfg["store"]) == len(StoreConfig.model_fields) and cfg["supervisor"]["children"]


def test_store_supervisor_and_tree() -> None:
    cfg = uncommented()
    assert StoreConfig.model_validate(cfg["store"]) == StoreConfig()
    assert TreeConfig.from_config(cfg) == TreeConfig.from_config({})
    typed, empty = TreeSettings.from_raw(cfg), TreeSettings()
    assert child_names(typed) == child_names(empty)
    assert tree_specs(typed, python="py") == tree_specs(empty, python="py")


def test_bus_lanes_and_control(tmp_path: Path) -> None:
    empty, full = _homes(tmp_path)
    a, b = Endpoints.from_config(empty), Endpoints.from_config(full)
    assert (a.workers, a.tcp, a.curve) == (b.workers, b.tcp, b.curve)
    assert lanes_config(empty) == lanes_config(full)
    control = ConfigSource(full, GeodeConfig.from_raw).snapshot.control  # read as actors/control.py does
    assert (control.idle_timeout_s, control.queue_max) == (IDLE_TIMEOUT_S, QUEUE_MAX)
    typed = ConfigSource(full, TreeSettings.from_raw).snapshot  # the documented defaults are the schema's
    same = set(TreeSettings.model_fields) - {"raw", "model", "providers", "supervisor"}  # checked elsewhere
    assert {f: getattr(typed, f) for f in same} == {f: getattr(TreeSettings(), f) for f in same}
    assert typed.supervisor.tree == TreeSettings().supervisor.tree


def test_executor(tmp_path: Path) -> None:
    empty, full = _homes(tmp_path)
    bus: Any = SimpleNamespace(transport=None)
    built = []
    for home in (empty, full):
        ws = home.root / "workspace"
        ctx = ChildContext("executor", 1, home)
        ex = executor_from_config(bus, ctx)
        checks = ex._checks
        built.append((ex.services["bash_limits"], checks.roots, checks.workspace.relative_to(ws.parent)))
    assert built[0] == built[1]


@pytest.mark.parametrize("mode", ["IPC", "DAEMON"])
def test_loop_worker_turn_settings(mode: str) -> None:
    run = turns.TurnRun(turn_id="t", session_id="s", mode=mode, settings={"model": "claude-opus-5-5"})
    got = [turn_settings(run, TreeSettings.from_raw(cfg)) for cfg in ({}, uncommented())]
    assert got[0] == got[1]
    assert TreeSettings.from_raw(uncommented()).loop == TreeSettings().loop  # capacity, workers and bounds
    assert VerifySettings(**uncommented()["verify"]) == VerifySettings()


@pytest.mark.parametrize("model", MODELS)
def test_provider_settings(model: str, tmp_path: Path) -> None:
    env = {"GEODE_HOME": str(tmp_path / "nohome"), "CODEX_HOME": str(tmp_path / "nocodex")}
    empty, full = GeodeConfig(), GeodeConfig.from_raw(uncommented())
    a = resolve_settings(model, env=env, config=empty)
    b = resolve_settings(model, env=env, config=full)
    assert a == b
    default = resolve_settings(None, env=env, config=empty).model
    assert resolve_settings(None, env=env, config=full).model == default


def test_hooks_mcp_policy_and_logging() -> None:
    cfg = uncommented()
    assert load_hooks(cfg) == [] and load_mcp_servers(cfg) == []
    typed = GeodeConfig.from_raw(cfg)
    assert computer_allowed_in_daemon(typed) is computer_allowed_in_daemon(GeodeConfig()) is False
    assert default_denylist("DAEMON", config=typed) == default_denylist("DAEMON", config=GeodeConfig())
    assert str(cfg["log"]["level"]).upper() == "INFO"  # actors/tree/process_logging.py's default
