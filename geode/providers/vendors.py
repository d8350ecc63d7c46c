"""Vendor endpoints as configuration: which wire adapter, which key variable, which base URL.

OpenAI-compatible vendors (Z.ai GLM, OpenRouter) are rows here, not copies of the OpenAI adapter.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from geode.providers.adapter_base import Endpoint, WireAdapter
from geode.providers.catalogue import WireApi
from geode.providers.codex import DEFAULT_BACKEND_URL
from geode.providers.retry import Retrier
from geode.providers.settings import VENDOR_ALIASES


@dataclass(frozen=True)
class VendorSpec:
    name: str
    wire: WireApi  # the vendor's default wire; the catalogue may pick another per model
    key_env: str | None
    base_url_env: str | None
    default_base_url: str
    options: dict[str, Any] = field(default_factory=dict)


VENDORS: dict[str, VendorSpec] = {
    "anthropic": VendorSpec(
        "anthropic",
        "anthropic-messages",
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_BASE_URL",
        "https://api.anthropic.com",
    ),
    "openai": VendorSpec(
        "openai",
        "openai-responses",
        "OPENAI_API_KEY",
        "OPENAI_BASE_URL",
        "https://api.openai.com/v1",
        {"max_tokens_field": "max_completion_tokens"},
    ),
    "glm": VendorSpec("glm", "openai-chat", "ZAI_API_KEY", "ZAI_BASE_URL", "https://api.z.ai/api/paas/v4"),
    "openrouter": VendorSpec(
        "openrouter",
        "openai-chat",
        "OPENROUTER_API_KEY",
        "OPENROUTER_BASE_URL",
        "https://openrouter.ai/api/v1",
    ),
    "codex": VendorSpec("codex", "openai-responses", None, "CODEX_BASE_URL", DEFAULT_BACKEND_URL),
}


def vendor(name: str) -> VendorSpec:
    return VENDORS[VENDOR_ALIASES.get(name, name)]


def make_adapter(wire: WireApi, endpoint: Endpoint, *, retrier: Retrier | None = None) -> WireAdapter:
    """The adapter for a wire API (the SDK itself is imported only when the adapter first calls)."""
    if wire == "anthropic-messages":
        from geode.providers.anthropic_messages import AnthropicMessagesAdapter

        return AnthropicMessagesAdapter(endpoint, retrier=retrier)
    if wire == "openai-chat":
        from geode.providers.openai_chat import OpenAIChatAdapter

        return OpenAIChatAdapter(endpoint, retrier=retrier)
    from geode.providers.openai_responses import OpenAIResponsesAdapter

    return OpenAIResponsesAdapter(endpoint, retrier=retrier)
