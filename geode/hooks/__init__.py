"""Public hooks: deciding and observation events, TOML/command hooks (Claude Code contract) and callables.

The names below load on first use, so importing a leaf such as ``geode.hooks.settings`` (the config schema
does) does not import the hook runner.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from geode.hooks.events import DECIDING_EVENTS, HookEvent, HookOutcome
    from geode.hooks.runner import HookRunner

_WHERE = {
    **dict.fromkeys(["DECIDING_EVENTS", "HookEvent", "HookOutcome"], "geode.hooks.events"),
    "HookRunner": "geode.hooks.runner",
}
__all__ = ["DECIDING_EVENTS", "HookEvent", "HookOutcome", "HookRunner"]


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module 'geode.hooks' has no attribute {name!r}")
    return getattr(importlib.import_module(_WHERE[name]), name)
