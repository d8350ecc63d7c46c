"""OpenAI Chat Completions adapter (also Z.ai GLM, OpenRouter and any OpenAI-compatible server)."""

from __future__ import annotations

import json
from functools import partial
from typing import Any

from geode.conversation import ImageBlock, Message, TextBlock, ToolResultBlock, ToolUseBlock
from geode.providers.adapter_base import Endpoint, StreamSink, WireAdapter, http_timeout, json_args, post_json
from geode.providers.catalogue import model_info
from geode.providers.images import load_image
from geode.providers.openai_spliced import (
    SplicedWire,
    dumps,
    items_json,
    replaced_by_extra_body,
    without_history,
)
from geode.providers.types import ModelRequest, ModelResponse, StopReason, ToolSchema, Usage

FINISH = {
    "stop": StopReason.END_TURN,
    "tool_calls": StopReason.TOOL_USE,
    "function_call": StopReason.TOOL_USE,
    "length": StopReason.MAX_TOKENS,
    "content_filter": StopReason.REFUSAL,
}


def make_openai_client(ep: Endpoint) -> Any:
    from geode.providers import sdk_lazy_types

    sdk_lazy_types.install()  # before the SDK's first import: its unused re-export packages stay unloaded
    import openai

    return openai.OpenAI(
        api_key=ep.api_key or "unset",
        base_url=ep.base_url,
        max_retries=0,
        timeout=http_timeout(ep, openai),
        default_headers=ep.default_headers or None,
    )


def chat_messages(request: ModelRequest) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    system = "\n\n".join(s.text for s in request.system if s.text)
    if system:
        out.append({"role": "system", "content": system})
    for m in request.messages:
        out.extend(_project(m, request.model))
    return out


def _user_content(m: Message, model: str) -> str | list[dict[str, Any]]:
    """A user message's content: its text, or (with images) text and ``image_url`` parts in order."""
    if not any(isinstance(b, ImageBlock) for b in m.content):
        return "".join(b.text for b in m.content if isinstance(b, TextBlock))
    parts: list[dict[str, Any]] = []
    for b in m.content:
        if isinstance(b, TextBlock) and b.text:
            parts.append({"type": "text", "text": b.text})
        elif isinstance(b, ImageBlock):
            loaded = load_image(b, model=model)
            if isinstance(loaded, str):
                parts.append({"type": "text", "text": loaded})
            else:
                parts.append({"type": "image_url", "image_url": {"url": loaded.data_url}})
    return parts


def _project(m: Message, model: str = "") -> list[dict[str, Any]]:
    text = "".join(b.text for b in m.content if isinstance(b, TextBlock))
    if m.role == "assistant":
        msg: dict[str, Any] = {"role": "assistant", "content": text or None}
        calls = [b for b in m.content if isinstance(b, ToolUseBlock)]
        if calls:
            msg["tool_calls"] = [
                {
                    "id": c.id,
                    "type": "function",
                    "function": {"name": c.name, "arguments": json.dumps(c.input)},
                }
                for c in calls
            ]
        return [msg]
    out: list[dict[str, Any]] = [
        {"role": "tool", "tool_call_id": b.tool_use_id, "content": b.content}
        for b in m.content
        if isinstance(b, ToolResultBlock)
    ]
    content = _user_content(m, model)
    if content:
        out.append({"role": "user", "content": content})
    return out


def message_json(m: Message) -> bytes:
    """The encoded items of a message without pictures."""
    return items_json(_project(m))


def _pictures_json(m: Message, model: str) -> bytes:
    return items_json(_project(m, model))


SPLICED = {"messages", "tools", "tool_choice"}


def tool_param(tool: ToolSchema) -> dict[str, Any]:
    fn = {"name": tool.name, "description": tool.description, "parameters": tool.input_schema}
    return {"type": "function", "function": fn}


def chat_usage(raw: dict[str, Any] | None) -> Usage:
    if not raw:
        return Usage()
    details = raw.get("prompt_tokens_details") or {}
    return Usage(
        input_tokens=raw.get("prompt_tokens") or 0,
        output_tokens=raw.get("completion_tokens") or 0,
        cache_read_tokens=details.get("cached_tokens") or 0,
    )


def parse_completion(data: dict[str, Any], provider: str) -> ModelResponse:
    choice = (data.get("choices") or [{}])[0]
    msg = choice.get("message") or {}
    calls = tuple(
        ToolUseBlock(
            id=c["id"], name=c["function"]["name"], input=json_args(c["function"].get("arguments") or "")
        )
        for c in msg.get("tool_calls") or []
    )
    raw_stop = choice.get("finish_reason")
    return ModelResponse(
        text=msg.get("content") or "",
        tool_calls=calls,
        stop_reason=FINISH.get(raw_stop or "", StopReason.OTHER),
        usage=chat_usage(data.get("usage")),
        model=data.get("model") or "",
        provider=provider,
        raw_stop_reason=raw_stop,
    )


def parse_chunks(chunks: Any, sink: StreamSink, provider: str) -> ModelResponse:
    text: list[str] = []
    calls: dict[int, dict[str, Any]] = {}
    usage, model, raw_stop = Usage(), "", None
    for ch in chunks:
        model = ch.get("model") or model
        if ch.get("usage"):
            usage = chat_usage(ch["usage"])
        for choice in ch.get("choices") or []:
            delta = choice.get("delta") or {}
            piece = delta.get("content")
            if piece:
                text.append(piece)
                sink(piece)
            for tc in delta.get("tool_calls") or []:
                slot = calls.setdefault(tc.get("index", 0), {"id": None, "name": "", "args": []})
                slot["id"] = tc.get("id") or slot["id"]
                fn = tc.get("function") or {}
                slot["name"] = fn.get("name") or slot["name"]
                slot["args"].append(fn.get("arguments") or "")
            raw_stop = choice.get("finish_reason") or raw_stop
    blocks = tuple(
        ToolUseBlock(id=s["id"] or f"call_{i}", name=s["name"], input=json_args("".join(s["args"])))
        for i, s in sorted(calls.items())
    )
    return ModelResponse(
        text="".join(text),
        tool_calls=blocks,
        stop_reason=FINISH.get(raw_stop or "", StopReason.OTHER),
        usage=usage,
        model=model,
        provider=provider,
        raw_stop_reason=raw_stop,
    )


class OpenAIChatAdapter(WireAdapter):
    """``POST {base}/chat/completions`` through the official ``openai`` SDK client.

    Options: ``max_tokens_field`` (default ``max_tokens``; OpenAI itself wants ``max_completion_tokens``),
    ``stream_usage`` (default True: ``stream_options.include_usage``), ``extra_body``.
    """

    adapter = "openai-chat"

    def _make_client(self) -> Any:
        return make_openai_client(self.endpoint)

    def build_body(self, request: ModelRequest) -> dict[str, Any]:
        opts = self.endpoint.options
        body: dict[str, Any] = {
            "model": model_info(request.model).wire_id,
            "messages": chat_messages(request),
        }
        body[opts.get("max_tokens_field", "max_tokens")] = request.max_tokens
        if request.tools:
            body["tools"] = [tool_param(t) for t in request.tools]
            body["tool_choice"] = request.tool_choice
        if request.stream:
            body["stream"] = True
            if opts.get("stream_usage", True):
                body["stream_options"] = {"include_usage": True}
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
        lead = [dumps(m) for m in body["messages"]]  # the system message
        with_pictures = partial(_pictures_json, model=request.model)
        body["messages"] = self._spliced.messages(request, with_pictures, lead)
        if request.tools:
            body["tools"] = self._spliced.tools(request.tools)
            body["tool_choice"] = request.tool_choice
        return body

    def _send(self, body: dict[str, Any], request: ModelRequest, sink: StreamSink) -> ModelResponse:
        import openai

        client = self.client
        if not body.get("stream"):
            return parse_completion(post_json(client, "/chat/completions", body), self.name)
        stream = post_json(client, "/chat/completions", body, stream_cls=openai.Stream[object])
        with stream:
            return parse_chunks(stream, sink, self.name)
