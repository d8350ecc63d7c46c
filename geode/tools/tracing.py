"""The executor's span of one tool call (GenAI's ``execute_tool <name>``): the tool's name and call id, its
outcome, and its input and result only with ``[telemetry] include_content`` (redacted). The no-op span when
tracing is off or the call came without a trace context."""

from __future__ import annotations

from geode.telemetry import spans
from geode.tools.spec import ToolCall, ToolResult
from geode.tools.structured_text import carried, expand


def tool_span(call: ToolCall) -> spans.Span:
    if not spans.enabled():
        return spans.NOOP
    attrs = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": call.name,
        "gen_ai.tool.call.id": call.id,
        "gen_ai.tool.call.arguments": spans.content(call.input),
    }
    return spans.span(f"execute_tool {call.name}", attrs)


def tool_ended(sp: spans.Span, result: ToolResult) -> None:
    sp.set("geode.tool.executed", result.executed)
    if result.is_error:
        sp.set("error.type", result.error_type or "tool_error")
        sp.fail(result.error_type or "tool_error")
    shown = spans.content(result.content)
    if shown is not None and carried(result.content) is not None:  # the object an MCP result's text holds
        shown = spans.content(expand(result.content))
    sp.set("gen_ai.tool.call.result", shown)
