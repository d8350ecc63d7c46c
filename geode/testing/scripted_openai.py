"""The scripted provider's OpenAI wires: Chat Completions and Responses, JSON and SSE, plus error bodies."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

from geode.testing.scenario import ScriptedError, ScriptedReply

ERROR_TYPES = {400: "invalid_request_error", 401: "invalid_request_error", 429: "rate_limit_exceeded"}


def error_body(err: ScriptedError) -> dict[str, Any]:
    etype = err.type or ERROR_TYPES.get(err.status, "server_error")
    return {"error": {"message": err.message, "type": etype, "param": None, "code": err.code}}


def _data(obj: dict[str, Any]) -> bytes:
    return f"data: {json.dumps(obj)}\n\n".encode()


def _calls(reply: ScriptedReply, rid: str) -> list[tuple[str, str, str]]:
    return [
        (tc.id or f"call_{rid}_{i}", tc.name, json.dumps(tc.input)) for i, tc in enumerate(reply.tool_calls)
    ]


# --- Chat Completions ---------------------------------------------------------------------------------------


def _finish(reply: ScriptedReply) -> str:
    return reply.stop_reason or ("tool_calls" if reply.tool_calls else "stop")


def _chat_usage(reply: ScriptedReply) -> dict[str, Any]:
    u = reply.usage
    return {
        "prompt_tokens": u.input_tokens,
        "completion_tokens": u.output_tokens,
        "total_tokens": u.input_tokens + u.output_tokens,
        "prompt_tokens_details": {"cached_tokens": u.cache_read_tokens},
    }


def chat_json(reply: ScriptedReply, model: str, rid: str) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": reply.text or None}
    calls = _calls(reply, rid)
    if calls:
        message["tool_calls"] = [
            {"id": cid, "type": "function", "function": {"name": name, "arguments": args}}
            for cid, name, args in calls
        ]
    return {
        "id": f"chatcmpl-{rid}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": _finish(reply)}],
        "usage": _chat_usage(reply),
    }


def chat_stream(reply: ScriptedReply, model: str, rid: str, include_usage: bool) -> Iterator[bytes]:
    base = {
        "id": f"chatcmpl-{rid}",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": model,
    }

    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        return _data({**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})

    yield chunk({"role": "assistant", "content": ""})
    for piece in reply.text_chunks:
        yield chunk({"content": piece})
    if reply.stream_error_after_chunks is not None:
        yield _data(error_body(reply.stream_error_after_chunks))
        return
    for i, (cid, name, args) in enumerate(_calls(reply, rid)):
        first = {"index": i, "id": cid, "type": "function", "function": {"name": name, "arguments": ""}}
        yield chunk({"tool_calls": [first]})
        for part in (args[: len(args) // 2], args[len(args) // 2 :]):
            yield chunk({"tool_calls": [{"index": i, "function": {"arguments": part}}]})
    yield chunk({}, _finish(reply))
    if include_usage:
        yield _data({**base, "choices": [], "usage": _chat_usage(reply)})
    yield b"data: [DONE]\n\n"


# --- Responses ----------------------------------------------------------------------------------------------


def _responses_usage(reply: ScriptedReply) -> dict[str, Any]:
    u = reply.usage
    return {
        "input_tokens": u.input_tokens,
        "input_tokens_details": {
            "cached_tokens": u.cache_read_tokens,
            "cache_write_tokens": u.cache_write_tokens,
        },
        "output_tokens": u.output_tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": u.input_tokens + u.output_tokens,
    }


def _message_item(rid: str, text: str, status: str = "completed") -> dict[str, Any]:
    content = [{"type": "output_text", "text": text, "annotations": []}] if status == "completed" else []
    return {"type": "message", "id": f"msg_{rid}", "role": "assistant", "status": status, "content": content}


def _call_items(reply: ScriptedReply, rid: str) -> list[dict[str, Any]]:
    return [
        {
            "type": "function_call",
            "id": f"fc_{rid}_{i}",
            "call_id": cid,
            "name": name,
            "arguments": args,
            "status": "completed",
        }
        for i, (cid, name, args) in enumerate(_calls(reply, rid))
    ]


def response_json(reply: ScriptedReply, model: str, rid: str, status: str = "completed") -> dict[str, Any]:
    output: list[dict[str, Any]] = []
    if reply.text:
        output.append(_message_item(rid, reply.text))
    output.extend(_call_items(reply, rid))
    body: dict[str, Any] = {
        "id": f"resp_{rid}",
        "object": "response",
        "created_at": int(time.time()),
        "model": model,
        "status": status,
        "output": output,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "usage": _responses_usage(reply),
    }
    if reply.stop_reason == "max_output_tokens":
        body["status"] = "incomplete"
        body["incomplete_details"] = {"reason": "max_output_tokens"}
    return body


def response_stream(reply: ScriptedReply, model: str, rid: str) -> Iterator[bytes]:
    """created, output_item.added, content_part.added, output_text.delta*, done events, completed."""
    seq = 0

    def ev(etype: str, **payload: Any) -> bytes:
        nonlocal seq
        seq += 1
        data = json.dumps({"type": etype, "sequence_number": seq, **payload})
        return f"event: {etype}\ndata: {data}\n\n".encode()

    skeleton = {**response_json(reply, model, rid), "status": "in_progress", "output": [], "usage": None}
    yield ev("response.created", response=skeleton)
    out_index = 0
    if reply.text or reply.stream_error_after_chunks:
        item_id = f"msg_{rid}"
        part = {"type": "output_text", "text": "", "annotations": []}
        yield ev("response.output_item.added", output_index=0, item=_message_item(rid, "", "in_progress"))
        yield ev("response.content_part.added", item_id=item_id, output_index=0, content_index=0, part=part)
        for piece in reply.text_chunks:
            yield ev(
                "response.output_text.delta",
                item_id=item_id,
                output_index=0,
                content_index=0,
                delta=piece,
                logprobs=[],
            )
        if reply.stream_error_after_chunks is not None:
            err = reply.stream_error_after_chunks
            yield ev("error", code=err.code or err.type or "server_error", message=err.message, param=None)
            return
        yield ev(
            "response.output_text.done",
            item_id=item_id,
            output_index=0,
            content_index=0,
            text=reply.text,
            logprobs=[],
        )
        yield ev(
            "response.content_part.done",
            item_id=item_id,
            output_index=0,
            content_index=0,
            part={**part, "text": reply.text},
        )
        yield ev("response.output_item.done", output_index=0, item=_message_item(rid, reply.text))
        out_index = 1
    for item in _call_items(reply, rid):
        yield ev(
            "response.output_item.added",
            output_index=out_index,
            item={**item, "arguments": "", "status": "in_progress"},
        )
        args = item["arguments"]
        for part_args in (args[: len(args) // 2], args[len(args) // 2 :]):
            yield ev(
                "response.function_call_arguments.delta",
                item_id=item["id"],
                output_index=out_index,
                delta=part_args,
            )
        yield ev(
            "response.function_call_arguments.done",
            item_id=item["id"],
            output_index=out_index,
            arguments=args,
            name=item["name"],
        )
        yield ev("response.output_item.done", output_index=out_index, item=item)
        out_index += 1
    final = response_json(reply, model, rid)
    kind = "response.incomplete" if final["status"] == "incomplete" else "response.completed"
    yield ev(kind, response=final)
