"""delegate_task: runs a task as a child turn (depth 1) through the executor's injected delegate service."""

from __future__ import annotations

import threading
from typing import Any, Protocol

from geode.tools.handlers import ToolEnv, ToolFailure
from geode.tools.spec import ToolContext

MAX_DEPTH = 1


class Delegate(Protocol):
    """Runs ``task`` as a child turn (own session, subagent_depth = parent + 1); returns at least ``text`` and
    ``termination_reason``. ``timeout_s`` is what the call has left; ``requested_s`` the tool's argument."""

    def __call__(
        self,
        task: str,
        *,
        parent: ToolContext,
        timeout_s: float,
        requested_s: float | None = None,
        cancel: threading.Event | None = None,
    ) -> dict[str, Any]: ...


def delegate_task(args: dict[str, Any], env: ToolEnv) -> dict[str, Any]:
    if env.ctx.subagent_depth >= MAX_DEPTH:
        raise ToolFailure("Sub-agents cannot delegate further (depth 1).", "tool_policy_denied")
    delegate: Delegate | None = env.service("delegate")
    if delegate is None:
        raise ToolFailure(
            "Delegation is unavailable in this executor (no delegate configured).", "tool_unavailable"
        )
    requested = args.get("timeout_s")
    out = delegate(
        args["task"],
        parent=env.ctx,
        timeout_s=env.deadline_s,
        requested_s=float(requested) if requested else None,
        cancel=env.cancel,
    )
    return {"task": args["task"], **dict(out or {})}
