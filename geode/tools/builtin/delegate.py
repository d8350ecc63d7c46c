"""delegate_task: runs a headless child session (depth 1) through an injected delegate callable."""

from __future__ import annotations

from typing import Any, Protocol

from geode.tools.handlers import ToolEnv, ToolFailure
from geode.tools.spec import ToolContext

MAX_DEPTH = 1


class Delegate(Protocol):
    """Runs ``task`` as a child session (HEADLESS, subagent_depth = parent + 1); returns its result."""

    def __call__(self, task: str, *, parent: ToolContext, timeout_s: float) -> dict[str, Any]: ...


def delegate_task(args: dict[str, Any], env: ToolEnv) -> dict[str, Any]:
    if env.ctx.subagent_depth >= MAX_DEPTH:
        raise ToolFailure("Sub-agents cannot delegate further (depth 1).", "tool_policy_denied")
    delegate: Delegate | None = env.service("delegate")
    if delegate is None:
        raise ToolFailure(
            "Delegation is unavailable in this executor (no delegate configured).", "tool_unavailable"
        )
    out = delegate(args["task"], parent=env.ctx, timeout_s=env.deadline_s)
    return {"task": args["task"], **dict(out or {})}
