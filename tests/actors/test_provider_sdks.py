"""The provider SDKs the supervisor asks the zygote to import (``actors/tree/provider_sdks.py``): those of the
configured model, its fallback chain and the voice-note transcription; the wire of each model decided as
``geode.providers.selection`` decides it (compared here, so the two cannot drift apart)."""

from __future__ import annotations

from typing import Any

import pytest

from actors.tree.config_sections import TreeSettings
from actors.tree.provider_sdks import configured_models, provider_sdks, wire_of
from actors.tree.zygote import PROVIDERS_ENV, WARM, sdk_modules
from geode.providers.selection import Sources, resolve_settings

CASES: list[tuple[dict[str, Any], dict[str, str], tuple[str, ...]]] = [
    ({}, {}, ("anthropic",)),  # the default model
    ({"providers": {"model": "claude-sonnet-5"}}, {}, ("anthropic",)),
    ({"providers": {"model": "gpt-6-sol"}}, {}, ("openai",)),
    ({"providers": {"model": "gpt-5.3-codex"}}, {}, ("openai",)),
    ({"providers": {"model": "glm-5.3"}}, {}, ("openai",)),
    ({"providers": {"model": "openrouter/openrouter/free"}}, {}, ("openai",)),
    ({"providers": {"model": "claude-sonnet-5", "fallback": ["gpt-5.5"]}}, {}, ("anthropic", "openai")),
    ({"providers": {"model": "glm-5.3", "glm": {"wire": "anthropic-messages"}}}, {}, ("anthropic",)),
    ({"providers": {"model": "claude-sonnet-5"}}, {"GEODE_MODEL": "gpt-6-sol"}, ("openai",)),
    ({"messengers": {"transcription": "openai"}}, {}, ("anthropic", "openai")),
]


@pytest.mark.parametrize(("raw", "env", "sdks"), CASES)
def test_the_zygote_imports_the_sdks_of_the_configured_models(
    raw: dict[str, Any], env: dict[str, str], sdks: tuple[str, ...]
) -> None:
    config = TreeSettings.from_raw(raw)
    assert provider_sdks(config, env) == sdks
    src = Sources(env=env, dotenv={}, config=config, process=env)
    for model in configured_models(config, env):
        assert wire_of(model, config) == resolve_settings(model, sources=src).wire, model
    assert resolve_settings(None, sources=src).model == configured_models(config, env)[0]


def test_the_zygote_imports_every_provider_sdk_when_the_supervisor_names_none() -> None:
    assert sdk_modules({}) == WARM  # a zygote started by an older supervisor, or a test's own
    assert sdk_modules({PROVIDERS_ENV: "anthropic"}) == ("httpx", "anthropic")
    assert sdk_modules({PROVIDERS_ENV: "openai", "GEODE_ZYGOTE_WARM": "x.y"}) == ("httpx", "openai", "x.y")
    assert sdk_modules({PROVIDERS_ENV: ""}) == ("httpx",)
