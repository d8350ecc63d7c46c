"""Which provider SDKs the zygote imports for the loop workers: only those the tree's config uses.

``anthropic`` and ``openai`` are ~39 and ~20 MiB of heap once imported with their first client (~1,540 and
~440 modules through ``geode/providers/sdk_lazy_types.py``'s finder; ~73 and ~37 MiB, ~3,900 and ~990 modules
without), held by the zygote and shared by every loop worker forked after it. The supervisor names the SDKs
of the configured model, its fallback chain and the voice-note transcription (``[messengers] transcription =
"openai"``) in the children's environment (``actors.tree.zygote.PROVIDERS_ENV``); the zygote imports those. A
session that selects another vendor's model (``--model``, a ``geode reload``) still works: its loop worker
imports that SDK at the turn (``geode.providers`` imports every SDK where it is first used), in that worker
only.

The wire is decided as :func:`geode.providers.selection.resolve_settings` decides it, from the catalogue and
``[providers.<vendor>] wire`` (``tests/actors/test_provider_sdks.py`` compares the two), without importing
``selection`` here: it imports ``http.client`` and the adapters, which the daemon does not need.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from actors.tree.zygote import PROVIDER_SDKS
from geode.home import GeodeHome
from geode.providers.catalogue import DEFAULT_MODEL, model_info

SDK_OF_WIRE = {"anthropic-messages": "anthropic", "openai-chat": "openai", "openai-responses": "openai"}


def configured_env(home: GeodeHome) -> dict[str, str]:
    """``GEODE_MODEL`` as the children see it: the process environment over ``$GEODE_HOME/.env``."""
    model = os.environ.get("GEODE_MODEL") or home.load_dotenv().get("GEODE_MODEL")
    return {"GEODE_MODEL": model} if model else {}


def configured_models(config: Any, env: Mapping[str, str]) -> list[str]:
    """The model a new session uses (as ``selection.choose_model`` picks it) and its fallback chain."""
    providers = config.providers
    first = env.get("GEODE_MODEL") or providers.model or config.model or DEFAULT_MODEL
    return [first, *providers.fallback]


def wire_of(model: str, config: Any) -> str:
    """The wire API ``model`` is called with: ``[providers.<vendor>] wire`` or the catalogue's."""
    info = model_info(model)
    if info.provider == "codex":
        return "openai-responses"
    sections = config.providers.model_dump(by_alias=True, exclude_none=True)
    section = sections.get(info.provider) or {}
    return str(section.get("wire") or info.wire)


def provider_sdks(config: Any, env: Mapping[str, str]) -> tuple[str, ...]:
    """The provider SDK modules the config's models need (every one when in doubt)."""
    try:
        wires = {wire_of(m, config) for m in configured_models(config, env)}
        voice = config.messengers.transcription == "openai"
    except Exception:  # an unusual config: import them all, as before
        return PROVIDER_SDKS
    if not wires <= SDK_OF_WIRE.keys():
        return PROVIDER_SDKS
    wanted = {SDK_OF_WIRE[w] for w in wires} | ({"openai"} if voice else set())
    return tuple(sdk for sdk in PROVIDER_SDKS if sdk in wanted)
