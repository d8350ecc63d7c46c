"""The PostToolUse hook after a dispatch: it may add context for the model or withhold the result."""

from __future__ import annotations

from geode.hooks.events import HookEvent
from geode.hooks.runner import HookRunner
from geode.tools.checks import correlation
from geode.tools.receipts import OMITTED
from geode.tools.spec import DataClass, ToolCall, ToolContext, ToolResult, ToolSpec
from geode.tools.structured_text import expand


def post_tool_use(
    hooks: HookRunner | None, ctx: ToolContext, spec: ToolSpec, call: ToolCall, result: ToolResult
) -> ToolResult:
    """``result`` as the hooks leave it (personal-data arguments and results are not shown to them)."""
    if hooks is None or hooks.idle:  # no hook: ``run`` would answer an empty outcome
        return result
    personal = spec.policy.data_class is DataClass.PERSONAL
    payload = {
        "tool_name": call.name,
        "tool_input": {} if personal else dict(call.input),
        "tool_response": OMITTED if personal else expand(result.content),  # a carried text: its object
        "has_error": result.is_error,
        "executed": result.executed,
    }
    out = hooks.run(HookEvent.POST_TOOL_USE, payload, correlation(ctx, call))
    if out.blocked:
        body = {
            "error": "Tool result withheld by PostToolUse hook",
            "error_type": "hook_blocked",
            "blocked_by_hook": True,
            "recoverable": False,
        }
        if out.reason:
            body["reason"] = out.reason
        return result.model_copy(
            update={
                "content": body,
                "is_error": True,
                "error_type": "hook_blocked",
                "additional_context": out.additional_context,
            }
        )
    if out.additional_context:
        joined = "\n".join(x for x in (result.additional_context, out.additional_context) if x)
        return result.model_copy(update={"additional_context": joined})
    return result
