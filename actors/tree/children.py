"""The GEODE process tree: child names in start order and their specs, from the typed ``config.toml``."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any

from actors.tree.config_sections import DEFAULT_LOOP_WORKERS, ChildOverride, TreeSettings
from actors.tree.registry import kind_of
from actors.tree.spec import ChildSpec

__all__ = ["DEFAULT_LOOP_WORKERS", "SHUTDOWN_MS", "child_names", "tree_specs"]
SHUTDOWN_MS = {"store": 5000, "lanes": 5000}  # the durable writers get longer to flush


def _typed(config: TreeSettings | Mapping[str, Any]) -> TreeSettings:
    return config if isinstance(config, TreeSettings) else TreeSettings.from_raw(config)


def child_names(config: TreeSettings | Mapping[str, Any]) -> list[str]:
    """store, lanes, executor, loop-1..loop-N (``[loop] workers``), control, messengers."""
    n = _typed(config).loop.workers  # 1..64, checked by the schema
    return ["store", "lanes", "executor", *(f"loop-{i}" for i in range(1, n + 1)), "control", "messengers"]


def tree_specs(config: TreeSettings | Mapping[str, Any], python: str = sys.executable) -> list[ChildSpec]:
    """Per-child overrides live in ``[supervisor.children.<name or kind>]`` (restart, shutdown_ms)."""
    settings = _typed(config)
    per = settings.supervisor.children
    specs = []
    for name in child_names(settings):
        over: dict[str, Any] = {}
        for key in (kind_of(name), name):  # the name's own table wins over its kind's
            if key in per:
                over.update(per[key].model_dump(exclude_unset=True))
        default = ChildOverride(shutdown_ms=SHUTDOWN_MS.get(name, ChildOverride().shutdown_ms))
        restart = over.get("restart", default.restart)
        shutdown = over.get("shutdown_ms", default.shutdown_ms)
        specs.append(ChildSpec(name, (python, "-m", "actors.tree.child_main", name), restart, shutdown))
    return specs
