"""Anthropic Messages API adapter: body projection (system cache boundary, tools), stream/JSON parsing."""

from __future__ import annotations

from functools import partial
from operator import is_
from typing import Any

from pydantic_core import to_json

from geode.conversation import ImageBlock, Message, TextBlock, ToolResultBlock, ToolUseBlock
from geode.providers.adapter_base import (
    JSON_HEADERS,
    Encoded,
    Joined,
    StreamSink,
    WireAdapter,
    body_chunks,
    http_timeout,
    json_args,
    post_json,
)
from geode.providers.catalogue import model_info
from geode.providers.encoded_blocks import EncodedBlocks
from geode.providers.encoded_history import EncodedHistory
from geode.providers.identity_memo import IdentityMemo
from geode.providers.images import load_image
from geode.providers.sdk_send import Senders, json_of, sse_data
from geode.providers.types import ModelRequest, ModelResponse, StopReason, SystemSection, ToolSchema, Usage

STOP_REASONS = {
    "end_turn": StopReason.END_TURN,
    "stop_sequence": StopReason.END_TURN,
    "pause_turn": StopReason.END_TURN,
    "tool_use": StopReason.TOOL_USE,
    "max_tokens": StopReason.MAX_TOKENS,
    "model_context_window_exceeded": StopReason.MAX_TOKENS,
    "refusal": StopReason.REFUSAL,
}


def system_blocks(sections: tuple[SystemSection, ...]) -> list[dict[str, Any]]:
    """System text blocks; ``cache_control`` goes on the last section that closes the cacheable prefix."""
    blocks: list[dict[str, Any]] = [{"type": "text", "text": s.text} for s in sections if s.text]
    kept = [s for s in sections if s.text]
    last = max((i for i, s in enumerate(kept) if s.cache_boundary), default=None)
    if last is not None:
        blocks[last]["cache_control"] = {"type": "ephemeral"}
    return blocks


def image_param(block: ImageBlock, model: str) -> dict[str, Any]:
    """An image content block (base64 source, read and verified now), or a text note in its place."""
    loaded = load_image(block, model=model)
    if isinstance(loaded, str):
        return {"type": "text", "text": loaded}
    return {
        "type": "image",
        "source": {"type": "base64", "media_type": loaded.media_type, "data": loaded.data},
    }


def message_param(message: Message, model: str = "") -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    for b in message.content:
        if isinstance(b, TextBlock):
            if b.text:
                content.append({"type": "text", "text": b.text})
        elif isinstance(b, ImageBlock):
            content.append(image_param(b, model))
        elif isinstance(b, ToolUseBlock):
            content.append({"type": "tool_use", "id": b.id, "name": b.name, "input": b.input})
        elif isinstance(b, ToolResultBlock):
            block: dict[str, Any] = {
                "type": "tool_result",
                "tool_use_id": b.tool_use_id,
                "content": b.content,
            }
            if b.is_error:
                block["is_error"] = True
            content.append(block)
    return {"role": message.role, "content": content}


def tool_param(tool: ToolSchema) -> dict[str, Any]:
    return {"name": tool.name, "description": tool.description, "input_schema": tool.input_schema}


SPLICED = {"messages", "tools", "tool_choice", "system"}
_TOOL_JSON: IdentityMemo[bytes] = IdentityMemo()  # tool schema -> its encoded param


def dumps(value: Any) -> bytes:
    """``value`` as compact UTF-8 JSON, by pydantic's encoder (a long tool result's text ~3x cheaper than
    ``json.dumps``; the same values, no space after ``,`` and ``:``)."""
    return to_json(value)


def message_json(message: Message) -> bytes:
    """The encoded ``message_param`` of a message without pictures."""
    return dumps(message_param(message))


def _pictures_json(message: Message, model: str) -> bytes:
    return dumps(message_param(message, model))


def _tool_json(tool: ToolSchema) -> bytes:
    return dumps(tool_param(tool))


def _same(kept: tuple[ToolSchema, ...], tools: tuple[ToolSchema, ...]) -> bool:
    """The very same schema objects (a validated request copies the tuple, not its items)."""
    return kept is tools or (len(kept) == len(tools) and all(map(is_, kept, tools)))


USAGE_FIELDS = (
    ("input_tokens", "input_tokens"),
    ("output_tokens", "output_tokens"),
    ("cache_read_input_tokens", "cache_read_tokens"),
    ("cache_creation_input_tokens", "cache_write_tokens"),
)


def _pick_usage(raw: dict[str, Any] | None, into: dict[str, int]) -> None:
    """The integer counts of a wire ``usage`` object over ``into`` (a missing or non-integer one keeps what
    ``into`` holds: a stream's ``message_delta`` carries only some of them)."""
    for wire, field in USAGE_FIELDS:
        value = (raw or {}).get(wire)
        if isinstance(value, int):
            into[field] = int(value)


def usage_of(raw: dict[str, Any] | None) -> Usage:
    counts: dict[str, int] = {}
    _pick_usage(raw, counts)
    return Usage(**counts)


def parse_message(data: dict[str, Any], provider: str) -> ModelResponse:
    text: list[str] = []
    calls: list[ToolUseBlock] = []
    for block in data.get("content") or []:
        if block.get("type") == "text":
            text.append(block.get("text") or "")
        elif block.get("type") == "tool_use":
            calls.append(ToolUseBlock(id=block["id"], name=block["name"], input=block.get("input") or {}))
    raw_stop = data.get("stop_reason")
    return ModelResponse(
        text="".join(text),
        tool_calls=tuple(calls),
        stop_reason=STOP_REASONS.get(raw_stop or "", StopReason.OTHER),
        usage=usage_of(data.get("usage")),
        model=data.get("model") or "",
        provider=provider,
        raw_stop_reason=raw_stop,
    )


def parse_stream(events: Any, sink: StreamSink, provider: str) -> ModelResponse:
    """Fold raw Messages stream events (dicts) into a ModelResponse, forwarding text deltas in order."""
    text: list[str] = []
    blocks: dict[int, dict[str, Any]] = {}
    usage: dict[str, int] = {}  # one Usage built at the end, not one per usage-carrying event
    model, raw_stop = "", None
    for ev in events:
        etype = ev.get("type")
        if etype == "message_start":
            msg = ev.get("message") or {}
            model = msg.get("model") or ""
            _pick_usage(msg.get("usage"), usage)
        elif etype == "content_block_start":
            block = ev.get("content_block") or {}
            if block.get("type") == "tool_use":
                blocks[ev.get("index", 0)] = {"id": block.get("id"), "name": block.get("name"), "json": []}
        elif etype == "content_block_delta":
            delta = ev.get("delta") or {}
            if delta.get("type") == "text_delta":
                piece = delta.get("text") or ""
                text.append(piece)
                sink(piece)
            elif delta.get("type") == "input_json_delta" and ev.get("index", 0) in blocks:
                blocks[ev.get("index", 0)]["json"].append(delta.get("partial_json") or "")
        elif etype == "message_delta":
            raw_stop = (ev.get("delta") or {}).get("stop_reason") or raw_stop
            _pick_usage(ev.get("usage"), usage)
    calls = tuple(
        ToolUseBlock(id=b["id"], name=b["name"], input=json_args("".join(b["json"])))
        for _, b in sorted(blocks.items())
    )
    return ModelResponse(
        text="".join(text),
        tool_calls=calls,
        stop_reason=STOP_REASONS.get(raw_stop or "", StopReason.OTHER),
        usage=Usage(**usage),
        model=model,
        provider=provider,
        raw_stop_reason=raw_stop,
    )


class AnthropicMessagesAdapter(WireAdapter):
    """``POST /v1/messages`` through the official ``anthropic`` SDK client."""

    adapter = "anthropic-messages"

    def _make_client(self) -> Any:
        from geode.providers import sdk_lazy_types, sdk_tls

        sdk_lazy_types.install()  # before the SDK's first import: its unused re-export packages stay unloaded
        import anthropic

        ep = self.endpoint
        timeout = http_timeout(ep, anthropic)
        return anthropic.Anthropic(
            api_key=ep.api_key or "unset",
            base_url=ep.base_url,
            max_retries=0,
            timeout=timeout,
            default_headers=ep.default_headers or None,
            # the SDK's own default client, with the process's one TLS context (the zygote's: ~3 MiB a worker)
            http_client=sdk_tls.http_client(anthropic, ep.base_url, timeout),
        )

    def build_body(self, request: ModelRequest) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": model_info(request.model).wire_id,
            "max_tokens": request.max_tokens,
            "messages": [message_param(m, request.model) for m in request.messages],
        }
        if request.system:
            body["system"] = system_blocks(request.system)
        if request.tools:
            body["tools"] = [tool_param(t) for t in request.tools]
            body["tool_choice"] = {"type": request.tool_choice}
        if request.stream:
            body["stream"] = True
        body.update(self.endpoint.options.get("extra_body") or {})
        return body

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._history = EncodedHistory(message_json)
        self._tools: tuple[tuple[ToolSchema, ...], list[bytes]] = ((), [])  # the last request's, encoded
        self._senders = Senders("/v1/messages", JSON_HEADERS)
        self._system = EncodedBlocks()  # the prompt's sections, by text: the same each round of a turn

    def wire_body(self, request: ModelRequest) -> dict[str, Any]:
        """``build_body`` with each message and tool encoded once per object (a message with a picture is
        projected every time: its file is read and verified per request)."""
        if SPLICED & set(self.endpoint.options.get("extra_body") or {}):
            return self.build_body(request)  # the endpoint's extra body replaces what would be spliced
        # build_body's of the request without messages, tools and system (no copy of the request made)
        body: dict[str, Any] = {
            "model": model_info(request.model).wire_id,
            "max_tokens": request.max_tokens,
            "messages": [],
        }
        if request.stream:
            body["stream"] = True
        body.update(self.endpoint.options.get("extra_body") or {})
        if request.system:
            body["system"] = Encoded(self._system.items(system_blocks(request.system)))
        with_pictures = partial(_pictures_json, model=request.model)
        key = request.metadata.get("session_id", "")
        body["messages"] = Joined(self._history.joined(key, request.messages, with_pictures))
        if request.tools:
            tools, encoded = self._tools
            if not _same(tools, request.tools):  # a plan's schemas: the same objects for the whole turn
                encoded = [_TOOL_JSON.get(t, _tool_json) for t in request.tools]
                self._tools = (request.tools, encoded)
            body["tools"] = Encoded(encoded)
            body["tool_choice"] = {"type": request.tool_choice}
        return body

    def _send(self, body: dict[str, Any], request: ModelRequest, sink: StreamSink) -> ModelResponse:
        import anthropic

        client = self.client
        sender = self._senders.get(client)
        if sender is not None:  # the SDK's request built once per client (geode/providers/sdk_send.py)
            response = sender.send(body_chunks(body), stream=request.stream)
            if not request.stream:
                return parse_message(json_of(response), self.name)
            try:
                return parse_stream(sse_data(response, client), sink, self.name)
            finally:
                response.close()
        if not request.stream:
            data = post_json(client, "/v1/messages", body)
            return parse_message(data, self.name)
        stream = post_json(client, "/v1/messages", body, stream_cls=anthropic.Stream[object])
        with stream:
            return parse_stream(stream, sink, self.name)
