"""``[providers]``: the provider section (shared timeout, retry policy, fallback, prices, a table per vendor)
and its defaults, a leaf the provider modules import."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, create_model

from geode.providers.catalogue import WireApi

VENDOR_NAMES = ("anthropic", "openai", "glm", "openrouter", "codex")  # the rows of ``providers.vendors``
VENDOR_ALIASES = {"zai": "glm", "z.ai": "glm"}
PROVIDER_TIMEOUT_S = 300.0  # per-request timeout of a provider without its own timeout_s


@dataclass(frozen=True)
class RetryPolicy:
    """``[providers.retry]``: 3 attempts, base 2 s, cap 30 s; a Retry-After above 60 s stops retrying."""

    max_attempts: int = 3
    base_delay_s: float = 2.0
    max_delay_s: float = 30.0
    max_retry_after_s: float = 60.0

    def backoff_cap(self, failure: int) -> float:
        """Upper bound of the jittered delay after the ``failure``-th failure (1-based)."""
        return min(self.base_delay_s * 2 ** (failure - 1), self.max_delay_s)

    @classmethod
    def from_config(cls, raw: dict[str, object] | None) -> RetryPolicy:
        raw = raw or {}
        fields = {
            k: raw[k]
            for k in ("max_attempts", "base_delay_s", "max_delay_s", "max_retry_after_s")
            if k in raw
        }
        return cls(**fields)  # type: ignore[arg-type]


class PriceSection(BaseModel):
    """``[providers.pricing."<model id>"]``: USD per million tokens (``pricing.Price`` prices a response)."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    input_per_mtok: float = 0.0
    output_per_mtok: float = 0.0
    cache_read_per_mtok: float = 0.0
    cache_write_per_mtok: float = 0.0


class VendorSection(BaseModel):
    """``[providers.<vendor>]``: endpoint overrides; the key itself only ever comes from the environment."""

    api_key_env: str | None = None
    base_url: str | None = None
    wire: WireApi | None = None
    timeout_s: float | None = Field(default=None, gt=0)
    options: dict[str, Any] = Field(default_factory=dict)
    login: Literal["auto", "apikey", "subscription"] = "auto"  # [providers.openai]
    auth_file: str | None = None  # [providers.codex]
    refresh_url: str | None = None  # [providers.codex]


_VENDOR_FIELDS: dict[str, Any] = {
    name: (VendorSection | None, Field(default=None, alias=name))
    for name in sorted({*VENDOR_NAMES, *VENDOR_ALIASES})
}
_ProvidersBase = create_model(  # type: ignore[call-overload]
    "_ProvidersBase",
    __config__=ConfigDict(populate_by_name=True),
    **{n.replace(".", "_"): spec for n, spec in _VENDOR_FIELDS.items()},
)


class ProvidersSection(_ProvidersBase):  # type: ignore[misc, valid-type]
    """``[providers]``: the model, shared timeout/retry/fallback/pricing, one table per vendor."""

    model: str | None = None
    timeout_s: float = Field(default=PROVIDER_TIMEOUT_S, gt=0)
    retry: RetryPolicy = RetryPolicy()
    fallback: list[str] = Field(default_factory=list)
    pricing: dict[str, PriceSection] = Field(default_factory=dict)
