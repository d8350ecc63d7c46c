"""Optional per-model prices (USD per million tokens) from config, turned into ``Usage.cost_usd``.

No prices ship by default (the catalogue ids carry none): set them in `[providers.pricing."<id>"]`.
"""

from __future__ import annotations

from typing import Any

from geode.providers.settings import PriceSection
from geode.providers.types import ModelResponse, Usage


class Price(PriceSection):
    """A configured price that prices a response's usage."""

    def cost(self, usage: Usage) -> float:
        return (
            usage.input_tokens * self.input_per_mtok
            + usage.output_tokens * self.output_per_mtok
            + usage.cache_read_tokens * self.cache_read_per_mtok
            + usage.cache_write_tokens * self.cache_write_per_mtok
        ) / 1_000_000


def prices_from_config(providers_section: dict[str, Any]) -> dict[str, Price]:
    raw = providers_section.get("pricing") or {}
    return {model: Price.model_validate(p) for model, p in raw.items() if isinstance(p, dict)}


def priced(response: ModelResponse, model: str, prices: dict[str, Price]) -> ModelResponse:
    """The response with ``usage.cost_usd`` filled when a price is configured for ``model``."""
    price = prices.get(model)
    if price is None or response.usage.cost_usd:
        return response
    usage = response.usage.model_copy(update={"cost_usd": price.cost(response.usage)})
    return response.model_copy(update={"usage": usage})
