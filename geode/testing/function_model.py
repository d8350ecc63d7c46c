"""An in-process fake Provider for the loop's unit tests: a Python function of the request (or a script)."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Iterable
from typing import Any

from geode.conversation import ToolUseBlock
from geode.providers.types import (
    DeltaCallback,
    ModelRequest,
    ModelResponse,
    ProviderError,
    ProviderErrorKind,
    StopReason,
    Usage,
)
from geode.testing.scenario import split_words

FunctionResult = ModelResponse | str | ProviderError | dict[str, Any]


class FunctionModel:
    """Calls ``fn(request)`` for each completion and records every request in ``requests``.

    ``fn`` may return a ModelResponse, plain text, a dict ``{"text": ..., "tool_calls": [{"name", "input"}]}``
    or a ProviderError (raised). Text is streamed to ``on_delta`` word by word.
    """

    adapter = "function"

    def __init__(
        self, fn: Callable[[ModelRequest], FunctionResult], *, name: str = "function", model: str = ""
    ) -> None:
        self.fn = fn
        self.name = name
        self.model = model
        self.requests: list[ModelRequest] = []
        self._lock = threading.Lock()
        self._ids = itertools.count(1)

    @classmethod
    def script(cls, replies: Iterable[FunctionResult], *, name: str = "function") -> FunctionModel:
        """Replies in order; a request past the end raises an UNKNOWN ProviderError."""
        it = iter(list(replies))

        def fn(_req: ModelRequest) -> FunctionResult:
            try:
                return next(it)
            except StopIteration:
                return ProviderError(ProviderErrorKind.UNKNOWN, "FunctionModel script exhausted")

        return cls(fn, name=name)

    def complete(
        self,
        request: ModelRequest,
        on_delta: DeltaCallback | None = None,
        *,
        on_event: Callable[..., None] | None = None,  # accepted for parity with the real providers
    ) -> ModelResponse:
        with self._lock:
            self.requests.append(request)
        result = self.fn(request)
        if isinstance(result, ProviderError):
            raise result
        response = self._coerce(result, request)
        if on_delta is not None:
            for piece in split_words(response.text):
                on_delta(piece)
        return response

    def _coerce(self, result: FunctionResult, request: ModelRequest) -> ModelResponse:
        if isinstance(result, ModelResponse):
            return result.model_copy(update={"model": result.model or request.model, "provider": self.name})
        if isinstance(result, str):
            result = {"text": result}
        calls = tuple(
            ToolUseBlock(
                id=c.get("id") or f"call_{next(self._ids)}", name=c["name"], input=c.get("input") or {}
            )
            for c in result.get("tool_calls") or []
        )
        return ModelResponse(
            text=result.get("text", ""),
            tool_calls=calls,
            stop_reason=StopReason.TOOL_USE if calls else StopReason.END_TURN,
            usage=Usage(**(result.get("usage") or {})),
            model=request.model,
            provider=self.name,
        )
