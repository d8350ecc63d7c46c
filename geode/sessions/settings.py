"""Model and provider from the current settings, re-read from disk for every session."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from geode.home import GeodeHome

DEFAULT_MODEL = "claude-opus-5-5"
_PREFIXES: tuple[tuple[str, str], ...] = (
    ("claude-", "anthropic"),
    ("openrouter/", "openrouter"),
    ("gpt-", "openai"),
    ("codex", "openai"),
    ("o1", "openai"),
    ("o3", "openai"),
    ("o4", "openai"),
    ("glm-", "glm"),
)


@dataclass(frozen=True)
class ModelChoice:
    model: str
    provider: str
    origin: str  # "override" | "env" | "config" | "default"


def provider_for(model: str) -> str:
    for prefix, provider in _PREFIXES:
        if model.startswith(prefix):
            return provider
    return "anthropic"


def _config_model(cfg: Mapping[str, Any]) -> str | None:
    for section in ("model", "llm", "providers"):
        sub = cfg.get(section)
        if isinstance(sub, str) and sub:
            return sub
        if isinstance(sub, Mapping):
            for key in ("default", "model", "primary"):
                if isinstance(sub.get(key), str) and sub[key]:
                    return str(sub[key])
    return None


def current_model(
    home: GeodeHome, *, override: str | None = None, env: Mapping[str, str] | None = None
) -> ModelChoice:
    """The model a new session uses now: override > ``GEODE_MODEL`` > global config > catalogue default."""
    env = os.environ if env is None else env
    try:  # the providers issue's selection is the source of truth when it is available
        from geode.providers.selection import resolve_settings

        settings = resolve_settings(override, home=home, env=env)
        origin = "override" if override else ("env" if env.get("GEODE_MODEL") else "config")
        return ModelChoice(settings.model, settings.provider, origin)
    except Exception:  # unknown model ids etc.: fall back to the prefix table below
        pass
    if override:
        return ModelChoice(override, provider_for(override), "override")
    if env.get("GEODE_MODEL"):
        m = env["GEODE_MODEL"]
        return ModelChoice(m, env.get("GEODE_PROVIDER") or provider_for(m), "env")
    cfg = home.load_config()  # re-read every call: a running daemon honours config edits
    m = _config_model(cfg)
    if m:
        return ModelChoice(m, provider_for(m), "config")
    return ModelChoice(DEFAULT_MODEL, "anthropic", "default")
