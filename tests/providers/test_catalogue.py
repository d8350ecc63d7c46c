"""The catalogue: seed ids and defaults, prefix routing, capabilities, ids never rewritten."""

from __future__ import annotations

import pytest

from geode.providers.catalogue import (
    CATALOGUE,
    DEFAULT_MODEL,
    DEFAULTS,
    model_info,
    models_for,
    route_provider,
)


def test_defaults_match_the_seeds():
    assert DEFAULT_MODEL == "claude-opus-5-5"
    assert DEFAULTS["primary"] == "claude-opus-5-5"
    assert DEFAULTS["secondary"] == "claude-sonnet-5"
    assert DEFAULTS["budget"] == "claude-haiku-4-5-20251001"
    assert DEFAULTS["openai"] == DEFAULTS["codex"] == "gpt-6-sol"
    assert DEFAULTS["glm"] == "glm-5.3"
    assert {"openrouter/openrouter/free", "openrouter/openrouter/auto"} <= set(CATALOGUE)


def test_catalogue_sizes_match_the_seed_lists():
    assert len(models_for("anthropic")) == 12
    assert len(models_for("openai")) == 11
    assert len(models_for("glm")) == 9
    assert set(models_for("codex")) == {
        "gpt-6-astra",
        "gpt-6-sol",
        "gpt-6-luna",
        "gpt-5.6-sol",
        "gpt-5.6-terra",
        "gpt-5.6-luna",
    }


@pytest.mark.parametrize(
    ("model", "provider"),
    [
        ("claude-opus-5-5", "anthropic"),
        ("claude-future-9", "anthropic"),
        ("glm-5.3", "glm"),
        ("glm-9", "glm"),
        ("gpt-6-sol", "openai"),
        ("gpt-7", "openai"),
        ("o3", "openai"),
        ("o4-mini", "openai"),
        ("o3-pro", "openai"),
        ("gpt-9-codex", "codex"),
        ("gpt-9-codex-max", "codex"),
        ("gpt-9-codex-mini", "codex"),
        ("openrouter/anthropic/claude-x", "openrouter"),
        ("openrouter/openrouter/free", "openrouter"),
        ("mystery-model", "openai"),
    ],
)
def test_prefix_routing(model, provider):
    assert route_provider(model) == provider


def test_capabilities_and_wire_per_model():
    assert model_info("claude-sonnet-5").wire == "anthropic-messages"
    assert model_info("claude-sonnet-5").tool_format == "anthropic"
    assert model_info("gpt-6-sol").wire == "openai-responses"
    assert model_info("gpt-6-sol").sources == ("openai", "codex")
    assert model_info("glm-5.3").wire == "openai-chat"
    assert model_info("openrouter/openrouter/auto").wire == "openai-chat"
    assert all(m.streaming and m.context_window >= 128_000 for m in CATALOGUE.values())


def test_unknown_ids_are_never_rewritten():
    for mid in ("claude-opus-4-1", "gpt-5", "glm-4", "claude-opus-5-5-20991231"):
        info = model_info(mid)
        assert info.id == mid and info.wire_id == mid
        assert info.known is False
        assert info.context_window == (400_000 if info.provider == "openai" else 200_000)
    assert model_info("claude-opus-5-5").known is True


def test_openrouter_routing_prefix_is_the_only_wire_change():
    assert model_info("openrouter/openrouter/free").wire_id == "openrouter/free"
    assert model_info("openrouter/meta/llama-9").wire_id == "meta/llama-9"
