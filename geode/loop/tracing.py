"""The loop worker's spans: the turn (under the lanes' push that started it) and each model call, the latter
with the OpenTelemetry GenAI semantic conventions (``gen_ai.*``). Prompt and reply text go along only with
``[telemetry] include_content`` (redacted); the no-op span when tracing is off."""

from __future__ import annotations

from collections.abc import Callable

from geode.protocol import turns
from geode.providers.types import ModelRequest, ModelResponse, Provider
from geode.telemetry import spans


def turn_span(run: turns.TurnRun, parent: str | None) -> spans.Span:
    """The span of one run of a turn on this worker (a resumed run is another span of the same trace)."""
    attrs = {
        "geode.turn_id": run.turn_id,
        "geode.mode": run.mode,
        "geode.attempt": run.attempt,
        "geode.resume": run.resume,
        "geode.input": spans.content(run.input.text),
    }
    return spans.span("loop.turn", attrs, parent=parent)


def turn_ended(sp: spans.Span, result: turns.TurnResult) -> None:
    if sp is spans.NOOP:  # tracing off: nothing to set
        return
    sp.set("geode.termination_reason", str(result.termination_reason.value))
    sp.set("geode.tool_calls", result.tool_calls)
    sp.set("geode.rounds", result.rounds)
    if not result.succeeded:
        sp.fail(str(result.termination_reason.value))


def model_span(request: ModelRequest) -> spans.Span:
    """``chat <model>``, as the GenAI conventions name a chat model call."""
    if not spans.enabled():
        return spans.NOOP
    attrs = {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": request.model,
        "gen_ai.request.max_tokens": request.max_tokens,
        "gen_ai.input.messages": spans.content([m.model_dump(mode="json") for m in request.messages[-4:]]),
    }
    return spans.span(f"chat {request.model}", attrs, kind="client")


def model_answered(sp: spans.Span, response: ModelResponse) -> None:
    if sp is spans.NOOP:  # tracing off (every call of every turn, as shipped): nothing to set
        return
    sp.set("gen_ai.response.model", response.model or None)
    sp.set("gen_ai.provider.name", response.provider or None)
    sp.set("gen_ai.usage.input_tokens", response.usage.input_tokens)
    sp.set("gen_ai.usage.output_tokens", response.usage.output_tokens)
    sp.set("gen_ai.response.finish_reasons", [str(response.stop_reason.value)])
    sp.set("geode.attempts", response.attempts)
    sp.set("gen_ai.output.text", spans.content(response.text))


def complete(
    provider: Provider, request: ModelRequest, on_delta: Callable[[str], None] | None
) -> ModelResponse:
    """One provider call inside its span (a failed call's span says why; each retry is a span of its own)."""
    with model_span(request) as sp:
        response = provider.complete(request, on_delta)
        model_answered(sp, response)
        return response
