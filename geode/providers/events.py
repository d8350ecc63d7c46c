"""Provider events (retries, fallbacks) reported to an ``on_event`` callback so the loop can show them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

from pydantic import BaseModel, ConfigDict


class ProviderEvent(BaseModel):
    """``retry``: attempt ``attempt`` failed with ``reason``; the next starts after ``delay_s``.
    ``fallback``: ``model`` failed with ``reason``; ``to_model`` is next. ``gave_up``: retries stopped."""

    model_config = ConfigDict(frozen=True)
    type: Literal["retry", "fallback", "gave_up", "auth_refresh"]
    provider: str
    model: str
    attempt: int = 0
    max_attempts: int = 0  # the retry policy's attempts (0: unknown)
    reason: str = ""
    delay_s: float = 0.0
    to_provider: str | None = None
    to_model: str | None = None
    detail: str = ""


EventCallback = Callable[[ProviderEvent], None]
