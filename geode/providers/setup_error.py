"""SetupError: a provider that cannot be used as configured (no key, unknown model), said in one line."""

from __future__ import annotations

from geode.providers.types import ProviderError, ProviderErrorKind


class SetupError(ProviderError):
    """Final, never retried; its message is the whole one-line explanation (no kind prefix, no hint)."""

    def __init__(self, kind: ProviderErrorKind, message: str) -> None:
        super().__init__(kind, message, should_retry=False)
