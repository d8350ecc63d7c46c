"""The one domain shape every adapter speaks: a model request in, a model response out."""

from __future__ import annotations

from collections.abc import Callable
from enum import StrEnum
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field

from geode.conversation import Message, ToolUseBlock


class SystemSection(BaseModel):
    """A piece of the system prompt; ``cache_boundary`` marks the end of the cacheable prefix."""

    model_config = ConfigDict(frozen=True)
    name: str
    text: str
    cache_boundary: bool = False


class ToolSchema(BaseModel):
    """What the model sees of a tool (the provider projection of a plan's spec)."""

    model_config = ConfigDict(frozen=True)
    name: str
    description: str
    input_schema: dict[str, Any]


class ModelRequest(BaseModel):
    model_config = ConfigDict(frozen=True)
    model: str
    system: tuple[SystemSection, ...] = ()
    messages: tuple[Message, ...]
    tools: tuple[ToolSchema, ...] = ()
    tool_choice: Literal["auto", "none"] = "auto"
    max_tokens: int = 32768
    stream: bool = True
    metadata: dict[str, str] = Field(default_factory=dict)  # correlation ids (session, turn, step)


class StopReason(StrEnum):
    END_TURN = "end_turn"
    TOOL_USE = "tool_use"
    MAX_TOKENS = "max_tokens"
    REFUSAL = "refusal"
    OTHER = "other"


class Usage(BaseModel):
    model_config = ConfigDict(frozen=True)
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    cost_usd: float = 0.0


class ModelResponse(BaseModel):
    model_config = ConfigDict(frozen=True)
    text: str = ""
    tool_calls: tuple[ToolUseBlock, ...] = ()
    stop_reason: StopReason = StopReason.END_TURN
    usage: Usage = Usage()
    model: str = ""
    provider: str = ""
    raw_stop_reason: str | None = None
    attempts: int = 1  # how many HTTP attempts the call took (retries included)


class ProviderErrorKind(StrEnum):
    RATE_LIMIT = "rate_limit"
    OVERLOADED = "overloaded"  # 5xx / overloaded_error
    TIMEOUT = "timeout"
    CONNECTION = "connection"
    AUTH = "auth"
    BAD_REQUEST = "bad_request"
    CONTEXT_OVERFLOW = "context_overflow"
    BILLING = "billing"
    STREAM_INTERRUPTED = "stream_interrupted"  # failed after deltas were shown; never auto-retried
    UNKNOWN = "unknown"


RETRYABLE_KINDS = frozenset(
    {
        ProviderErrorKind.RATE_LIMIT,
        ProviderErrorKind.OVERLOADED,
        ProviderErrorKind.TIMEOUT,
        ProviderErrorKind.CONNECTION,
    }
)


class ProviderError(Exception):
    """A classified provider failure (after retries, when retryable)."""

    def __init__(
        self,
        kind: ProviderErrorKind,
        message: str,
        *,
        hint: str = "",
        status: int | None = None,
        retry_after_s: float | None = None,
        should_retry: bool | None = None,
        attempts: int = 1,
    ) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.hint = hint
        self.status = status
        self.retry_after_s = retry_after_s
        self.should_retry = should_retry
        self.attempts = attempts

    @property
    def retryable(self) -> bool:
        if self.should_retry is False:
            return False
        return self.kind in RETRYABLE_KINDS


DeltaCallback = Callable[[str], None]


class Provider(Protocol):
    """One configured model endpoint. ``complete`` raises :class:`ProviderError` on failure."""

    name: str  # provider name, e.g. "anthropic"
    adapter: str  # wire API, e.g. "anthropic-messages", "openai-chat", "openai-responses"

    def complete(self, request: ModelRequest, on_delta: DeltaCallback | None = None) -> ModelResponse: ...
