"""The model catalogue: known ids and defaults, prefix routing to a provider, per-model capabilities.

Exact ids are never rewritten or upgraded: an unknown id routes by prefix with default capabilities and
is sent to the provider as given (only the ``openrouter/`` routing prefix is stripped on the wire).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

WireApi = Literal["anthropic-messages", "openai-chat", "openai-responses"]
ProviderName = Literal["anthropic", "openai", "codex", "glm", "openrouter"]

DEFAULT_CONTEXT_WINDOW = 200_000

# GLM's text models and OpenRouter's selectors (which may pick a text-only model) take no images
TEXT_ONLY_PROVIDERS = frozenset({"glm", "openrouter"})

DEFAULT_MODEL = "claude-opus-5-5"
DEFAULTS: dict[str, str] = {
    "primary": "claude-opus-5-5",
    "anthropic": "claude-opus-5-5",
    "secondary": "claude-sonnet-5",
    "budget": "claude-haiku-4-5-20251001",
    "openai": "gpt-6-sol",
    "codex": "gpt-6-sol",
    "glm": "glm-5.3",
    "openrouter": "openrouter/openrouter/free",
}

PROVIDER_WIRE: dict[str, WireApi] = {
    "anthropic": "anthropic-messages",
    "openai": "openai-responses",
    "codex": "openai-responses",
    "glm": "openai-chat",
    "openrouter": "openai-chat",
}


class ModelInfo(BaseModel):
    """What the runtime needs to know about one model id."""

    model_config = ConfigDict(frozen=True)
    id: str
    provider: ProviderName
    wire: WireApi
    context_window: int = DEFAULT_CONTEXT_WINDOW
    streaming: bool = True
    tool_format: Literal["anthropic", "openai-function"] = "anthropic"
    sources: tuple[
        ProviderName, ...
    ] = ()  # providers that can serve it (e.g. openai API and codex subscription)
    known: bool = True
    router: bool = False  # an OpenRouter selector, not a fixed model
    image_input: bool = True  # takes image blocks (else an image becomes a text note)

    @property
    def wire_id(self) -> str:
        """The id sent on the wire (the ``openrouter/`` routing prefix removed; nothing else changes)."""
        if self.provider == "openrouter" and self.id.startswith("openrouter/"):
            return self.id.removeprefix("openrouter/")
        return self.id


def _m(
    mid: str,
    provider: ProviderName,
    *,
    ctx: int = DEFAULT_CONTEXT_WINDOW,
    sources: tuple[ProviderName, ...] = (),
    wire: WireApi | None = None,
    router: bool = False,
    images: bool | None = None,
) -> ModelInfo:
    w = wire or PROVIDER_WIRE[provider]
    fmt: Literal["anthropic", "openai-function"] = (
        "anthropic" if w == "anthropic-messages" else "openai-function"
    )
    return ModelInfo(
        id=mid,
        provider=provider,
        wire=w,
        context_window=ctx,
        tool_format=fmt,
        sources=sources or (provider,),
        router=router,
        image_input=provider not in TEXT_ONLY_PROVIDERS if images is None else images,
    )


_ANTHROPIC = (
    "claude-fable-5-1",
    "claude-opus-5-5",
    "claude-opus-5",
    "claude-sonnet-5",
    "claude-haiku-4-5-20251001",
    "claude-fable-5",
    "claude-opus-4-8",
    "claude-opus-4-7",
    "claude-opus-4-6",
    "claude-opus-4-5",
    "claude-sonnet-4-6",
    "claude-sonnet-4-5-20250929",
)
_OPENAI_AND_CODEX = ("gpt-6-astra", "gpt-6-sol", "gpt-6-luna", "gpt-5.6-sol", "gpt-5.6-terra", "gpt-5.6-luna")
_OPENAI_API_ONLY = ("gpt-5.5", "gpt-5.3-codex", "gpt-5.4", "gpt-5.4-mini", "gpt-5.4-nano")
_GLM = (
    "glm-5.3",
    "glm-5.3-flash",
    "glm-5.3-flashx",
    "glm-5.2",
    "glm-5.1",
    "glm-5",
    "glm-4.7",
    "glm-4.7-flashx",
    "glm-4.7-flash",
)
_OPENROUTER = ("openrouter/openrouter/free", "openrouter/openrouter/auto")

CATALOGUE: dict[str, ModelInfo] = {
    **{m: _m(m, "anthropic") for m in _ANTHROPIC},
    **{m: _m(m, "openai", ctx=400_000, sources=("openai", "codex")) for m in _OPENAI_AND_CODEX},
    **{m: _m(m, "openai", ctx=400_000) for m in _OPENAI_API_ONLY},
    **{m: _m(m, "glm") for m in _GLM},
    **{m: _m(m, "openrouter", router=True) for m in _OPENROUTER},
}

CODEX_SUFFIXES = ("-codex", "-codex-max", "-codex-mini")
OPENAI_PREFIXES = ("gpt-", "o3-", "o4-")
OPENAI_EXACT = ("o3", "o4-mini")


def route_provider(model_id: str) -> ProviderName:
    """The provider for an id: the catalogue entry when known, else prefix routing (fallback: openai)."""
    known = CATALOGUE.get(model_id)
    if known is not None:
        return known.provider
    if model_id.startswith("openrouter/"):
        return "openrouter"
    if model_id.endswith(CODEX_SUFFIXES):
        return "codex"
    if model_id.startswith("claude-"):
        return "anthropic"
    if model_id.startswith("glm-"):
        return "glm"
    if model_id.startswith(OPENAI_PREFIXES) or model_id in OPENAI_EXACT:
        return "openai"
    return "openai"


def model_info(model_id: str) -> ModelInfo:
    """Capabilities of ``model_id``; unknown ids get the routed provider's defaults, with the id unchanged."""
    known = CATALOGUE.get(model_id)
    if known is not None:
        return known
    provider = route_provider(model_id)
    info = _m(model_id, provider, ctx=400_000 if provider in ("openai", "codex") else DEFAULT_CONTEXT_WINDOW)
    return info.model_copy(update={"known": False})


def models_for(provider: str) -> list[str]:
    return [m.id for m in CATALOGUE.values() if provider in m.sources]


KNOWN_PREFIXES = ("claude-", "gpt-", "o3-", "o4-", "glm-", "openrouter/")


def routable(model_id: str) -> bool:
    """True when ``model_id`` is in the catalogue or routes by a known prefix or suffix (never a guess)."""
    return (
        model_id in CATALOGUE
        or model_id.startswith(KNOWN_PREFIXES)
        or model_id.endswith(CODEX_SUFFIXES)
        or model_id in OPENAI_EXACT
    )


def unknown_model_message(model_id: str) -> str | None:
    """The one-line error for a model id no provider is known for, else None."""
    if routable(model_id):
        return None
    prefixes = ", ".join(f"{p}…" for p in KNOWN_PREFIXES)
    return (
        f"unknown model {model_id!r}: known model ids start with {prefixes} or end with -codex "
        "(see `geode providers`)"
    )
