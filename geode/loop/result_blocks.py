"""The tool_result blocks the model sees for a batch's results (:func:`result_block`), the error results of
the calls a batch does not send (over the per-reply cap, not valid Unicode) and a cancelled batch's report."""

from __future__ import annotations

import json

from geode.conversation import Message, ToolResultBlock, ToolUseBlock
from geode.loop.settings import LoopSettings
from geode.tools.spec import ToolCall, ToolResult
from geode.tools.structured_text import render

# json.dumps(value, ensure_ascii=False, default=str)'s encoder, made once, not per call: the same text
TEXT = json.JSONEncoder(ensure_ascii=False, default=str)


def result_block(result: ToolResult, *, max_chars: int = 50_000) -> ToolResultBlock:
    """Serialize a result (ok, denial or error) as the tool_result the model sees."""
    text = render(result.content)  # an MCP structured result's carried text: the characters its map made
    if result.additional_context:
        text += f"\n\n[context] {result.additional_context}"
    if len(text) > max_chars:
        text = text[:max_chars] + f"\n[... {len(text) - max_chars} chars truncated]"
    return ToolResultBlock(tool_use_id=result.tool_use_id, content=text, is_error=result.is_error)


def over_cap_result(call: ToolCall | ToolUseBlock, cap: int) -> ToolResult:
    """The error tool_result of a call beyond the per-reply cap: it did not run."""
    tc = call if isinstance(call, ToolCall) else ToolCall(id=call.id, name=call.name, input=call.input)
    return ToolResult.error(
        tc, f"too many tool calls in one reply: only the first {cap} run", "too_many_tool_calls"
    )


def not_unicode_result(call: ToolCall | ToolUseBlock, where: str) -> ToolResult:
    """The error tool_result of a call whose arguments are not valid Unicode (a lone surrogate): not run."""
    tc = call if isinstance(call, ToolCall) else ToolCall(id=call.id, name=call.name, input=call.input)
    why = (
        f"argument {where!r} is not valid Unicode (it has a lone surrogate): the call did not run; "
        "send the text without it (a file whose name is not UTF-8 cannot be named by a tool)"
    )
    return ToolResult.error(tc, why, "invalid_tool_input")


def results_message(results: list[ToolResult], settings: LoopSettings) -> Message:
    blocks = tuple(result_block(r, max_chars=settings.max_tool_result_chars) for r in results)
    return Message(role="user", content=blocks, metadata={"origin": "tool_results"})


def cancel_report(results: list[ToolResult]) -> str:
    """One clause per call of a cancelled batch: ran, interrupted (GEODE stopped it after it began: it may
    have partly run), cancelled before it began, not started, or unknown."""
    parts = []
    for r in results:
        content = r.content if isinstance(r.content, dict) else {}
        if r.error_type == "cancelled":
            what = "not started"
        elif r.error_type == "too_many_tool_calls":
            what = "not run (over the per-reply cap)"
        elif content.get("outcome") == "interrupted":
            secs = content.get("seconds")
            after = f" after {secs:.1f}s" if isinstance(secs, int | float) else ""
            what = f"interrupted{after}, may have partly run"
        elif r.error_type == "tool_cancelled":
            what = "cancelled before it began"
        elif r.executed is None:
            what = "cancelled, outcome unknown (see geode receipts --uncertain)"
        elif r.is_error:
            what = f"ran ({r.error_type or 'error'})"
        else:
            what = "ran"
        parts.append(f"{r.name}: {what}")
    return "; ".join(parts) + "." if parts else "nothing ran."
