"""The GEODE process tree: child names in start order and their specs, from the typed ``config.toml``."""

from __future__ import annotations

import sys
from typing import Any

from actors.tree.config_sections import TreeSettings
from actors.tree.registry import kind_of
from actors.tree.settings import CHILD_SHUTDOWN_MS, ChildOverride
from actors.tree.spec import ChildSpec
from actors.tree.worker_role import WorkerRole

__all__ = ["child_names", "tree_specs"]


def child_names(settings: TreeSettings, role: WorkerRole | None = None, *, daemon: bool = False) -> list[str]:
    """store, lanes, executor, loop-1..loop-N (``[loop] workers``), control, messengers, and in the daemon's
    tree (``daemon``: ``geode serve``, never ``--repl`` or ``geode mcp``) the scheduler unless ``[schedule]
    enabled = false``, and the webhooks child when ``[webhooks] listen`` is set; a worker host (``role``) runs
    only its ``--children``: executor and/or loops."""
    n = settings.loop.workers  # 1..64, checked by the schema
    loops = [f"loop-{i}" for i in range(1, n + 1)]
    if role is not None:
        executor = ["executor"] if "executor" in role.children else []
        return [*executor, *(loops if "loop" in role.children else [])]
    scheduler = ["scheduler"] if daemon and settings.schedule.enabled else []
    webhooks = ["webhooks"] if daemon and settings.webhooks.listen else []
    return ["store", "lanes", "executor", *loops, "control", "messengers", *scheduler, *webhooks]


def tree_specs(
    settings: TreeSettings,
    python: str = sys.executable,
    role: WorkerRole | None = None,
    *,
    daemon: bool = False,
) -> list[ChildSpec]:
    """Per-child overrides live in ``[supervisor.children.<name or kind>]`` (restart, shutdown_ms)."""
    per = settings.supervisor.children
    specs = []
    for name in child_names(settings, role, daemon=daemon):
        over: dict[str, Any] = {}
        for key in (kind_of(name), name):  # the name's own table wins over its kind's
            if key in per:
                over.update(per[key].model_dump(exclude_unset=True))
        default = ChildOverride(shutdown_ms=CHILD_SHUTDOWN_MS.get(name, ChildOverride().shutdown_ms))
        restart = over.get("restart", default.restart)
        shutdown = over.get("shutdown_ms", default.shutdown_ms)
        argv = (python, "-m", "actors.tree.child_main", name)
        specs.append(ChildSpec(name, argv, restart, shutdown, sdks=_sdks(settings, name)))
    return specs


def _sdks(settings: TreeSettings, name: str) -> bool:
    """A loop worker imports its provider's SDK; the messengers child those of the platforms it binds."""
    kind = kind_of(name)
    return kind == "loop" or (kind == "messengers" and bool(settings.messengers.sdk_modules()))
