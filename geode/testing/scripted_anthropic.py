"""The scripted provider's Anthropic Messages wire: JSON replies, SSE event streams and error bodies."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from geode.testing.scenario import ScriptedError, ScriptedReply

ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "billing_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}


def sse(event: str, data: dict[str, Any]) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data)}\n\n".encode()


def error_body(err: ScriptedError) -> dict[str, Any]:
    etype = err.type or ERROR_TYPES.get(err.status, "api_error")
    return {"type": "error", "error": {"type": etype, "message": err.message}}


def _stop_reason(reply: ScriptedReply) -> str:
    if reply.stop_reason:
        return reply.stop_reason
    return "tool_use" if reply.tool_calls else "end_turn"


def _usage(reply: ScriptedReply, *, output: bool = True) -> dict[str, int]:
    u = reply.usage
    return {
        "input_tokens": u.input_tokens,
        "output_tokens": u.output_tokens if output else 1,
        "cache_read_input_tokens": u.cache_read_tokens,
        "cache_creation_input_tokens": u.cache_write_tokens,
    }


def _tool_blocks(reply: ScriptedReply, msg_id: str) -> list[dict[str, Any]]:
    return [
        {"type": "tool_use", "id": tc.id or f"toolu_{msg_id}_{i}", "name": tc.name, "input": tc.input}
        for i, tc in enumerate(reply.tool_calls)
    ]


def message_json(reply: ScriptedReply, model: str, msg_id: str) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    if reply.text:
        content.append({"type": "text", "text": reply.text})
    content.extend(_tool_blocks(reply, msg_id))
    return {
        "id": f"msg_{msg_id}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": _stop_reason(reply),
        "stop_sequence": None,
        "usage": _usage(reply),
    }


def message_stream(reply: ScriptedReply, model: str, msg_id: str) -> Iterator[bytes]:
    """message_start, content_block_start/delta/stop per block, message_delta, message_stop."""
    skeleton = message_json(reply, model, msg_id)
    skeleton.update(content=[], stop_reason=None, usage=_usage(reply, output=False))
    yield sse("message_start", {"type": "message_start", "message": skeleton})
    yield sse("ping", {"type": "ping"})
    index = 0
    if reply.text or reply.stream_error_after_chunks:
        block = {"type": "text", "text": ""}
        yield sse("content_block_start", {"type": "content_block_start", "index": 0, "content_block": block})
        for chunk in reply.text_chunks:
            delta = {"type": "text_delta", "text": chunk}
            yield sse("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta})
        if reply.stream_error_after_chunks is not None:
            yield sse("error", error_body(reply.stream_error_after_chunks))
            return
        yield sse("content_block_stop", {"type": "content_block_stop", "index": 0})
        index = 1
    for block in _tool_blocks(reply, msg_id):
        start = {**block, "input": {}}
        yield sse(
            "content_block_start", {"type": "content_block_start", "index": index, "content_block": start}
        )
        args = json.dumps(block["input"])
        for part in (args[: len(args) // 2], args[len(args) // 2 :]):
            delta = {"type": "input_json_delta", "partial_json": part}
            yield sse("content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta})
        yield sse("content_block_stop", {"type": "content_block_stop", "index": index})
        index += 1
    end = {"stop_reason": _stop_reason(reply), "stop_sequence": None}
    yield sse("message_delta", {"type": "message_delta", "delta": end, "usage": _usage(reply)})
    yield sse("message_stop", {"type": "message_stop"})
