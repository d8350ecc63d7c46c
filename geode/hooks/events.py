"""Hook event names, which of them may decide, and the outcome a hook chain returns."""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class HookEvent(StrEnum):
    USER_PROMPT_SUBMIT = "UserPromptSubmit"
    PRE_TOOL_USE = "PreToolUse"
    PERMISSION_REQUEST = "PermissionRequest"
    POST_TOOL_USE = "PostToolUse"
    PRE_COMPACT = "PreCompact"
    SESSION_START = "SessionStart"
    SESSION_END = "SessionEnd"
    POST_VERIFY = "PostVerify"
    STOP = "Stop"
    # observation only
    POST_COMPACT = "PostCompact"
    SUBAGENT_START = "SubagentStart"
    SUBAGENT_STOP = "SubagentStop"
    NOTIFICATION = "Notification"
    TOOL_EXEC_STARTED = "ToolExecStarted"
    TOOL_EXEC_ENDED = "ToolExecEnded"


DECIDING_EVENTS = frozenset(
    {
        HookEvent.USER_PROMPT_SUBMIT,
        HookEvent.PRE_TOOL_USE,
        HookEvent.PERMISSION_REQUEST,
        HookEvent.POST_TOOL_USE,
        HookEvent.PRE_COMPACT,
        HookEvent.POST_VERIFY,
        HookEvent.STOP,
    }
)
# run to the end like deciding events (their output is wanted), but a failing hook never blocks
CONTEXT_EVENTS = frozenset({HookEvent.SESSION_START})
# what a non-tool event's matcher is matched against (Claude Code's semantics)
MATCHED_FIELD = {
    HookEvent.SESSION_START: "source",
    HookEvent.SESSION_END: "reason",
    HookEvent.PRE_COMPACT: "trigger",
    HookEvent.POST_COMPACT: "trigger",
    HookEvent.NOTIFICATION: "notification_type",
}
TOOL_EVENTS = frozenset({HookEvent.PRE_TOOL_USE, HookEvent.PERMISSION_REQUEST, HookEvent.POST_TOOL_USE})

Decision = Literal["continue", "allow", "ask", "block"]
_RANK = {"continue": 0, "allow": 1, "ask": 2, "block": 3}


class HookOutcome(BaseModel):
    """What a chain of hooks decided.

    ``decision``: continue (no opinion) | allow | ask | block. For PreToolUse/PermissionRequest ``block`` is a
    denial; for PostToolUse it withholds the result; for Stop/PostVerify it means "do not finish yet" and
    ``instruction`` carries the repair instruction (Claude Code's ``decision: "block"`` + ``reason``).
    ``updates``: rewrites (PreToolUse: ``tool_input``, optionally ``tool_name``; others: payload keys).
    ``halt``: a hook returned ``continue: false`` (stop the whole turn; ``reason`` holds ``stopReason``).
    """

    model_config = ConfigDict(frozen=True)
    decision: Decision = "continue"
    reason: str = ""
    updates: dict[str, Any] = Field(default_factory=dict)
    additional_context: str | None = None
    instruction: str | None = None
    halt: bool = False
    decided_by: str = ""
    failures: tuple[str, ...] = ()

    @property
    def blocked(self) -> bool:
        return self.decision == "block"


def stronger(a: str, b: str) -> str:
    """The more restrictive of two decisions (block > ask > allow > continue)."""
    return a if _RANK[a] >= _RANK[b] else b
