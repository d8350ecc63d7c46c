"""Model and provider of a new session, from the typed config snapshot (in a tree: its validated copy)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from geode.config_schema import GeodeConfig
from geode.home import GeodeHome
from geode.providers.selection import resolve_settings


@dataclass(frozen=True)
class ModelChoice:
    model: str
    provider: str
    origin: str  # "override" | "env" | "config" | "default"


def current_model(
    home: GeodeHome,
    *,
    override: str | None = None,
    env: Mapping[str, str] | None = None,
    config: GeodeConfig | None = None,
) -> ModelChoice:
    """The model a new session uses now: override > ``GEODE_MODEL`` > global config > catalogue default.

    The providers' selection is the one source of truth (prefix routing, exact ids). ``config`` is the typed
    snapshot (None: :func:`config_snapshot` of ``home``, read now).
    """
    env = os.environ if env is None else env
    typed = config if config is not None else config_snapshot(home)
    settings = resolve_settings(override, home=home, env=env, config=typed)
    if override:
        origin = "override"
    elif env.get("GEODE_MODEL"):
        origin = "env"
    elif typed.providers.model:
        origin = "config"
    else:
        origin = "default"
    return ModelChoice(settings.model, settings.provider, origin)


def config_snapshot(home: GeodeHome) -> GeodeConfig:
    """``home``'s typed config as a tree child reads it: the tree's validated copy (written by `geode serve`
    and `geode reload`), so saving config.toml alone changes no session; outside a tree, the file."""
    from geode.config_source import ConfigSource  # lazy for start-up only: `geode --version` imports us

    return ConfigSource(home, GeodeConfig.from_raw, tree=True).snapshot
