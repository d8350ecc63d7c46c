"""OpenAI Responses API adapter (OpenAI API models and the Codex subscription backend)."""

from __future__ import annotations

import json
from functools import partial
from typing import Any

from geode.conversation import ImageBlock, Message, TextBlock, ToolResultBlock, ToolUseBlock
from geode.providers.adapter_base import StreamSink, WireAdapter, json_args, post_json
from geode.providers.catalogue import model_info
from geode.providers.classify import stream_error
from geode.providers.images import load_image
from geode.providers.openai_chat import make_openai_client
from geode.providers.openai_spliced import SplicedWire, items_json, replaced_by_extra_body, without_history
from geode.providers.types import (
    ModelRequest,
    ModelResponse,
    ProviderError,
    ProviderErrorKind,
    StopReason,
    ToolSchema,
    Usage,
)


def input_items(request: ModelRequest) -> list[dict[str, Any]]:
    return [item for m in request.messages for item in _items(m, request.model)]


def _items(m: Message, model: str = "") -> list[dict[str, Any]]:
    """One message's input items, in order."""
    items: list[dict[str, Any]] = []
    for b in m.content:
        if isinstance(b, TextBlock) and b.text:
            kind = "input_text" if m.role == "user" else "output_text"
            items.append({"role": m.role, "content": [{"type": kind, "text": b.text}]})
        elif isinstance(b, ImageBlock):
            loaded = load_image(b, model=model)
            part = (
                {"type": "input_text", "text": loaded}
                if isinstance(loaded, str)
                else {"type": "input_image", "image_url": loaded.data_url}
            )
            items.append({"role": "user", "content": [part]})
        elif isinstance(b, ToolUseBlock):
            items.append(
                {
                    "type": "function_call",
                    "call_id": b.id,
                    "name": b.name,
                    "arguments": json.dumps(b.input),
                }
            )
        elif isinstance(b, ToolResultBlock):
            items.append({"type": "function_call_output", "call_id": b.tool_use_id, "output": b.content})
    return items


def message_json(m: Message) -> bytes:
    """The encoded input items of a message without pictures."""
    return items_json(_items(m))


def _pictures_json(m: Message, model: str) -> bytes:
    return items_json(_items(m, model))


SPLICED = {"input", "tools", "tool_choice"}


def tool_param(tool: ToolSchema) -> dict[str, Any]:
    return {
        "type": "function",
        "name": tool.name,
        "description": tool.description,
        "parameters": tool.input_schema,
    }


def responses_usage(raw: dict[str, Any] | None) -> Usage:
    if not raw:
        return Usage()
    details = raw.get("input_tokens_details") or {}
    return Usage(
        input_tokens=raw.get("input_tokens") or 0,
        output_tokens=raw.get("output_tokens") or 0,
        cache_read_tokens=details.get("cached_tokens") or 0,
        cache_write_tokens=details.get("cache_write_tokens") or 0,
    )


def _stop(data: dict[str, Any], has_calls: bool) -> tuple[StopReason, str | None]:
    status = data.get("status")
    if status == "incomplete":
        reason = (data.get("incomplete_details") or {}).get("reason")
        if reason == "content_filter":
            return StopReason.REFUSAL, reason
        return StopReason.MAX_TOKENS, reason or status
    if has_calls:
        return StopReason.TOOL_USE, status
    return (StopReason.END_TURN if status in (None, "completed") else StopReason.OTHER), status


def parse_response(data: dict[str, Any], provider: str, streamed_text: str | None = None) -> ModelResponse:
    if data.get("status") == "failed" and data.get("error"):
        raise stream_error({"error": data["error"]})
    text: list[str] = []
    calls: list[ToolUseBlock] = []
    for item in data.get("output") or []:
        if item.get("type") == "message":
            for part in item.get("content") or []:
                if part.get("type") == "output_text":
                    text.append(part.get("text") or "")
        elif item.get("type") == "function_call":
            calls.append(
                ToolUseBlock(
                    id=item.get("call_id") or item.get("id"),
                    name=item["name"],
                    input=json_args(item.get("arguments") or ""),
                )
            )
    stop, raw = _stop(data, bool(calls))
    return ModelResponse(
        text=streamed_text if streamed_text is not None else "".join(text),
        tool_calls=tuple(calls),
        stop_reason=stop,
        usage=responses_usage(data.get("usage")),
        model=data.get("model") or "",
        provider=provider,
        raw_stop_reason=raw,
    )


def parse_events(events: Any, sink: StreamSink, provider: str) -> ModelResponse:
    text: list[str] = []
    items: list[dict[str, Any]] = []
    final: dict[str, Any] | None = None
    for ev in events:
        etype = ev.get("type")
        if etype == "response.output_text.delta":
            piece = ev.get("delta") or ""
            text.append(piece)
            sink(piece)
        elif etype == "response.output_item.done":
            items.append(ev.get("item") or {})
        elif etype in ("response.completed", "response.incomplete", "response.failed"):
            final = ev.get("response") or {}
        elif etype == "error":
            raise stream_error({"error": {"code": ev.get("code"), "message": ev.get("message")}})
    if final is None:
        raise ProviderError(ProviderErrorKind.CONNECTION, "Responses stream ended without response.completed")
    if not final.get("output") and items:  # some servers send a slim final response; use the streamed items
        final = {**final, "output": items}
    return parse_response(final, provider, streamed_text="".join(text) if text else None)


class OpenAIResponsesAdapter(WireAdapter):
    """``POST {base}/responses`` through the official ``openai`` SDK client.

    Options: ``store`` (sent when set), ``force_stream`` (always stream; the Codex backend requires it),
    ``send_max_tokens`` (default True), ``extra_body``.
    """

    adapter = "openai-responses"

    def _make_client(self) -> Any:
        return make_openai_client(self.endpoint)

    def build_body(self, request: ModelRequest) -> dict[str, Any]:
        opts = self.endpoint.options
        body: dict[str, Any] = {"model": model_info(request.model).wire_id, "input": input_items(request)}
        instructions = "\n\n".join(s.text for s in request.system if s.text)
        if instructions:
            body["instructions"] = instructions
        if request.tools:
            body["tools"] = [tool_param(t) for t in request.tools]
            body["tool_choice"] = request.tool_choice
        if opts.get("send_max_tokens", True):
            body["max_output_tokens"] = request.max_tokens
        if "store" in opts:
            body["store"] = bool(opts["store"])
        if request.stream or opts.get("force_stream"):
            body["stream"] = True
        body.update(opts.get("extra_body") or {})
        return body

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._spliced = SplicedWire(message_json, tool_param)

    def wire_body(self, request: ModelRequest) -> dict[str, Any]:
        """``build_body`` with each message's items and each tool encoded once per object (a message with a
        picture is projected every time: its file is read and verified per request)."""
        if replaced_by_extra_body(self.endpoint.options, SPLICED):
            return self.build_body(request)
        body = self.build_body(without_history(request))
        body["input"] = self._spliced.messages(request, partial(_pictures_json, model=request.model))
        if request.tools:
            body["tools"] = self._spliced.tools(request.tools)
            body["tool_choice"] = request.tool_choice
        return body

    def _send(self, body: dict[str, Any], request: ModelRequest, sink: StreamSink) -> ModelResponse:
        import openai

        client = self.client
        if not body.get("stream"):
            return parse_response(post_json(client, "/responses", body), self.name)
        stream = post_json(client, "/responses", body, stream_cls=openai.Stream[object])
        with stream:
            return parse_events(stream, sink, self.name)
