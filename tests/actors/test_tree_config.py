"""Tree settings from config.toml, the builder registry's placeholder fallback, and the instance lock."""

from __future__ import annotations

import sys
import types
from pathlib import Path

import pytest

from actors import registry
from actors.instance_lock import InstanceLock
from actors.supervisor_spec import TreeConfig
from actors.tree import child_names, tree_specs
from geode.protocol.errors import ConfigError


def test_defaults_and_loop_workers() -> None:
    assert child_names({}) == ["store", "lanes", "executor", "loop-1", "loop-2", "control", "messengers"]
    assert child_names({"loop": {"workers": 3}})[3:6] == ["loop-1", "loop-2", "loop-3"]
    cfg = TreeConfig.from_config({})
    assert (cfg.strategy, cfg.intensity, cfg.period_s) == ("one_for_one", 10, 60.0)


def test_per_child_overrides() -> None:
    raw = {
        "supervisor": {
            "strategy": "rest_for_one",
            "children": {"loop": {"restart": "transient"}, "loop-2": {"shutdown_ms": 100}},
        }
    }
    specs = {s.name: s for s in tree_specs(raw, python="py")}
    assert specs["loop-1"].restart == "transient" and specs["loop-2"].shutdown_ms == 100
    assert specs["store"].shutdown_ms == 5000 and specs["store"].argv == ("py", "-m", "actors.child", "store")
    assert TreeConfig.from_config(raw).strategy == "rest_for_one"


@pytest.mark.parametrize(
    "raw",
    [
        {"supervisor": {"strategy": "all_for_one"}},
        {"supervisor": {"intensty": 3}},
        {"supervisor": {"children": {"store": {"restart": "always"}}}},
        {"supervisor": {"children": {"store": {"grace": 1}}}},
        {"loop": {"workers": 0}},
    ],
)
def test_bad_config_is_a_config_error(raw: dict[str, object]) -> None:
    with pytest.raises(ConfigError):
        TreeConfig.from_config(raw)
        tree_specs(raw)
        child_names(raw)


def test_backoff_grows_and_is_capped() -> None:
    cfg = TreeConfig(backoff_base_s=0.2, backoff_max_s=1.0, backoff_jitter=0.0)
    assert [cfg.backoff(n) for n in range(1, 6)] == [0.0, 0.2, 0.4, 0.8, 1.0]
    jittered = TreeConfig(backoff_jitter=0.2).backoff(3)
    assert 0.32 <= jittered <= 0.48


def test_registry_falls_back_to_placeholder(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setitem(registry.BUILDERS, "ghost", "actors.no_such_module:build")
    assert registry.builder_for("ghost")[0] == registry.PLACEHOLDER
    monkeypatch.setitem(sys.modules, "actors_test_nobuild", types.ModuleType("actors_test_nobuild"))
    monkeypatch.setitem(registry.BUILDERS, "ghost", "actors_test_nobuild:build")
    assert registry.builder_for("ghost")[0] == registry.PLACEHOLDER
    assert registry.kind_of("loop-12") == "loop" and registry.kind_of("store") == "store"


def test_registry_does_not_hide_a_broken_owner_module(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    (tmp_path / "actors_test_broken.py").write_text("import no_such_dependency_xyz\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(registry.BUILDERS, "ghost", "actors_test_broken:build")
    with pytest.raises(ModuleNotFoundError, match="no_such_dependency_xyz"):
        registry.builder_for("ghost")


def test_instance_lock(tmp_path: Path) -> None:
    a, b = InstanceLock(tmp_path / "serve.lock"), InstanceLock(tmp_path / "serve.lock")
    assert not b.is_held()
    assert a.acquire()
    assert b.is_held() and not b.acquire()
    assert b.holder_pid() is not None
    a.release()
    assert not b.is_held() and b.acquire()
    b.release()
