"""Public hooks: deciding and observation events, TOML/command hooks (Claude Code contract) and callables."""

from geode.hooks.events import DECIDING_EVENTS, HookEvent, HookOutcome
from geode.hooks.runner import HookRunner

__all__ = ["DECIDING_EVENTS", "HookEvent", "HookOutcome", "HookRunner"]
