"""Model and provider from the current settings, re-read from disk for every session."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from geode.home import GeodeHome
from geode.providers.selection import resolve_settings

if TYPE_CHECKING:
    from geode.config_schema import GeodeConfig


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
    typed = _from_home(home)  # a broken file: the running tree's last good config
    cfg = typed.raw
    settings = resolve_settings(override, home=home, env=env, config=cfg)
    if override:
        origin = "override"
    elif env.get("GEODE_MODEL"):
        origin = "env"
    elif typed.providers.model:
        origin = "config"
    else:
        origin = "default"
    return ModelChoice(settings.model, settings.provider, origin)


def _from_home(home: GeodeHome) -> GeodeConfig:
    from geode.config_schema import GeodeConfig  # lazy: the schema imports the control core, which imports us

    return GeodeConfig.from_home(home)
