"""Tree settings from config.toml, the builder registry, and the instance lock."""

from __future__ import annotations

from pathlib import Path

import pytest

from actors.tree import registry
from actors.tree.children import child_names, tree_specs
from actors.tree.config_sections import TreeSettings
from actors.tree.instance_lock import InstanceLock
from actors.tree.spec import TreeConfig
from actors.tree.worker_role import WorkerRole
from geode.protocol.errors import ConfigError


def test_defaults_and_loop_workers() -> None:
    names = ["store", "lanes", "executor", "loop-1", "loop-2", "control", "messengers"]
    assert child_names(TreeSettings()) == names
    assert child_names(TreeSettings.from_raw({"loop": {"workers": 3}}))[3:6] == ["loop-1", "loop-2", "loop-3"]
    # the scheduler: geode serve's tree only (never --repl or geode mcp), unless [schedule] enabled = false,
    # and never on a worker host
    assert child_names(TreeSettings(), daemon=True) == [*names, "scheduler"]
    off = TreeSettings.from_raw({"schedule": {"enabled": False}})
    assert child_names(off, daemon=True) == names
    role = WorkerRole(
        host="w1", connect="tcp://127.0.0.1:7700", server_key="k" * 40, children=("executor", "loop")
    )
    assert child_names(TreeSettings(), role, daemon=True) == ["executor", "loop-1", "loop-2"]
    assert [s.name for s in tree_specs(TreeSettings(), python="py", daemon=True)][-1] == "scheduler"
    # the webhooks child: geode serve's tree only, when [webhooks] listen is set, never on a worker host
    hooks = TreeSettings.from_raw({"webhooks": {"listen": "127.0.0.1:8787"}})
    assert child_names(hooks, daemon=True) == [*names, "scheduler", "webhooks"]
    assert child_names(hooks) == names
    assert child_names(hooks, role, daemon=True) == ["executor", "loop-1", "loop-2"]
    cfg = TreeConfig.from_config({})
    assert (cfg.strategy, cfg.intensity, cfg.period_s) == ("one_for_one", 10, 10.0)
    assert (cfg.tree_intensity, cfg.tree_period_s, cfg.start_retries) == (40, 10.0, 10)


def test_per_child_overrides() -> None:
    raw = {
        "supervisor": {
            "strategy": "rest_for_one",
            "children": {"loop": {"restart": "transient"}, "loop-2": {"shutdown_ms": 100}},
        }
    }
    specs = {s.name: s for s in tree_specs(TreeSettings.from_raw(raw), python="py")}
    assert specs["loop-1"].restart == "transient" and specs["loop-2"].shutdown_ms == 100
    assert specs["store"].shutdown_ms == 5000 and specs["store"].argv == (
        "py",
        "-m",
        "actors.tree.child_main",
        "store",
    )
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
        TreeSettings.from_raw(raw)  # what every child builds its tree and specs from


def test_backoff_grows_and_is_capped() -> None:
    cfg = TreeConfig(backoff_base_s=0.2, backoff_max_s=1.0, backoff_jitter=0.0)
    assert [cfg.backoff(n) for n in range(1, 6)] == [0.0, 0.2, 0.4, 0.8, 1.0]
    jittered = TreeConfig(backoff_jitter=0.2).backoff(3)
    assert 0.32 <= jittered <= 0.48


def test_registry_names_every_process_and_refuses_an_unknown_kind() -> None:
    assert set(registry.BUILDERS) == {
        "store",
        "lanes",
        "executor",
        "loop",
        "control",
        "messengers",
        "scheduler",
        "webhooks",
    }
    assert all(registry.builder_for(k)[1] for k in registry.BUILDERS)  # every builder imports
    with pytest.raises(ConfigError, match="no actor process is named 'ghost'"):
        registry.builder_for("ghost-1")
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
