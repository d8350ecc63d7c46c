"""Opt-in fallback chains: when the primary model fails terminally, try the next one — visibly."""

from __future__ import annotations

from collections.abc import Sequence

from geode.providers.events import EventCallback, ProviderEvent
from geode.providers.types import (
    DeltaCallback,
    ModelRequest,
    ModelResponse,
    Provider,
    ProviderError,
    ProviderErrorKind,
)

NO_FALLBACK_KINDS = frozenset(
    {ProviderErrorKind.BAD_REQUEST, ProviderErrorKind.CONTEXT_OVERFLOW, ProviderErrorKind.STREAM_INTERRUPTED}
)


class FallbackProvider:
    """``primary`` first, then each ``(model, provider)`` of ``chain``; each switch is an event."""

    adapter = "fallback"

    def __init__(
        self,
        primary: Provider,
        chain: Sequence[tuple[str, Provider]],
        *,
        on_event: EventCallback | None = None,
    ) -> None:
        self.primary = primary
        self.chain = list(chain)
        self.on_event = on_event
        self.name = primary.name
        self.model = getattr(primary, "model", "")
        self.adapter = getattr(primary, "adapter", "fallback")

    def complete(
        self,
        request: ModelRequest,
        on_delta: DeltaCallback | None = None,
        *,
        on_event: EventCallback | None = None,
    ) -> ModelResponse:
        current, provider = request, self.primary
        remaining = list(self.chain)
        while True:
            try:
                if on_event is None:
                    return provider.complete(current, on_delta)
                return provider.complete(current, on_delta, on_event=on_event)  # type: ignore[call-arg]
            except ProviderError as err:
                if err.kind in NO_FALLBACK_KINDS or not remaining:
                    raise
                model, nxt = remaining.pop(0)
                event = ProviderEvent(
                    type="fallback",
                    provider=provider.name,
                    model=current.model,
                    reason=err.kind.value,
                    to_provider=nxt.name,
                    to_model=model,
                    detail=err.message[:200],
                )
                for cb in (self.on_event, on_event):
                    if cb is not None:
                        cb(event)
                current, provider = current.model_copy(update={"model": model}), nxt
