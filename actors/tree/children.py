"""The GEODE process tree: child names in start order and their specs, from ``config.toml``."""

from __future__ import annotations

import sys
from typing import Any

from actors.tree.registry import kind_of
from actors.tree.spec import ChildSpec
from geode.protocol.errors import ConfigError

DEFAULT_LOOP_WORKERS = 2
SHUTDOWN_MS = {"store": 5000, "lanes": 5000}  # the durable writers get longer to flush
SPEC_KEYS = {"restart", "shutdown_ms"}


def child_names(config: dict[str, Any]) -> list[str]:
    """store, lanes, executor, loop-1..loop-N (``[loop] workers``), control, messengers."""
    n = int((config.get("loop") or {}).get("workers", DEFAULT_LOOP_WORKERS))
    if not 1 <= n <= 64:
        raise ConfigError(f"[loop] workers must be between 1 and 64, not {n}")
    return ["store", "lanes", "executor", *(f"loop-{i}" for i in range(1, n + 1)), "control", "messengers"]


def tree_specs(config: dict[str, Any], python: str = sys.executable) -> list[ChildSpec]:
    """Per-child overrides live in ``[supervisor.children.<name or kind>]`` (restart, shutdown_ms)."""
    per = ((config.get("supervisor") or {}).get("children")) or {}
    specs = []
    for name in child_names(config):
        over = {**(per.get(kind_of(name)) or {}), **(per.get(name) or {})}
        unknown = set(over) - SPEC_KEYS
        if unknown:
            raise ConfigError(f"[supervisor.children.{name}] unknown keys: {', '.join(sorted(unknown))}")
        restart = over.get("restart", "permanent")
        if restart not in ("permanent", "transient", "temporary"):
            raise ConfigError(f"[supervisor.children.{name}] restart must be permanent|transient|temporary")
        shutdown = int(over.get("shutdown_ms", SHUTDOWN_MS.get(name, 3000)))
        specs.append(ChildSpec(name, (python, "-m", "actors.tree.child_main", name), restart, shutdown))
    return specs
