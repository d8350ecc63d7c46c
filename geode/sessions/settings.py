"""Model and provider from the current settings, re-read from disk for every session."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from geode.home import GeodeHome
from geode.providers.selection import resolve_settings


@dataclass(frozen=True)
class ModelChoice:
    model: str
    provider: str
    origin: str  # "override" | "env" | "config" | "default"


def current_model(
    home: GeodeHome, *, override: str | None = None, env: Mapping[str, str] | None = None
) -> ModelChoice:
    """The model a new session uses now: override > ``GEODE_MODEL`` > global config > catalogue default.

    The providers' selection is the one source of truth (prefix routing, exact ids); the config is re-read
    on every call, so a running daemon honours config edits. A bad config raises ``ConfigError``.
    """
    env = os.environ if env is None else env
    cfg = home.load_config()
    settings = resolve_settings(override, home=home, env=env, config=cfg)
    if override:
        origin = "override"
    elif env.get("GEODE_MODEL"):
        origin = "env"
    elif isinstance(cfg.get("providers"), Mapping) and cfg["providers"].get("model"):
        origin = "config"
    else:
        origin = "default"
    return ModelChoice(settings.model, settings.provider, origin)
