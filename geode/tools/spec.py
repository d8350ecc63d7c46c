"""Tool specs, safety policies, calls, contexts and results: the vocabulary of tool authority."""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class EffectClass(StrEnum):
    READ = "read"
    MUTATE = "mutate"
    EXECUTE = "execute"
    COMMUNICATE = "communicate"
    ADMINISTRATIVE = "administrative"


class DataClass(StrEnum):
    PUBLIC = "public"
    PERSONAL = "personal"


class ApprovalMode(StrEnum):
    NONE = "none"
    CACHED = "cached"  # "a" (always) may be remembered for the session
    PER_INVOCATION = "per_invocation"  # every call asks


class SafetyPolicy(BaseModel):
    """What a tool may do and how it is gated. Anything that is not ``read`` needs a resource strategy."""

    model_config = ConfigDict(frozen=True)
    effect: EffectClass = EffectClass.READ
    data_class: DataClass = DataClass.PUBLIC
    approval: ApprovalMode = ApprovalMode.NONE
    allow_headless: bool = True
    allow_subagents: bool = True
    resource_strategy: str | None = None  # e.g. "file_path", "channel_recipient", "global:<name>"
    denied: bool = False  # a declared denial


class ToolSpec(BaseModel):
    """One tool as bound into a plan: schema for the model, handler identity and policy for the executor."""

    model_config = ConfigDict(frozen=True)
    name: str
    description: str
    input_schema: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})
    handler: str  # handler identity, e.g. "builtin:read_file" or "mcp:<server>/<tool>"
    policy: SafetyPolicy = SafetyPolicy()
    deadline_s: float = 120.0
    scope: str = ""  # a directory: offered only to sessions working inside it (a project's MCP tools)


class ToolContext(BaseModel):
    """What the executor knows about a call beyond its arguments (set by the loop, never by the model)."""

    model_config = ConfigDict(frozen=True)
    session_id: str
    turn_id: str
    step_id: str
    operation_id: str
    mode: str = "IPC"  # IPC | REPL | DAEMON | HEADLESS | AUTOMATION
    model: str = ""
    provider: str = ""
    adapter: str = ""
    plan_hash: str = ""
    plan_generation: int = 0
    origin: str = ""  # where approvals and events go (e.g. "control:<conn>")
    workspace: str = ""
    subagent_depth: int = 0
    deadline_ms: int | None = None
    skip_permissions: bool = False  # the turn's submitter skipped prompts (IPC/REPL only; set from the turn)
    # AUTOMATION only: the tools an operator-defined job names in allowed_tools (run without an approval)
    granted_tools: tuple[str, ...] = ()
    scope: str = ""  # the session's scope (geode.memory.scopes): its memory and search audience
    # the skills in use by the session (use_skill succeeded in its history), the one used last at the end
    skills: tuple[str, ...] = ()


class ToolCall(BaseModel):
    model_config = ConfigDict(frozen=True)
    id: str  # the provider's tool_use id
    name: str
    input: dict[str, Any] = Field(default_factory=dict)


class ToolResult(BaseModel):
    """A tool's outcome. ``content`` is JSON-able; denials and failures set ``is_error`` and ``error_type``.

    ``executed`` is True when the handler ran, False when it provably did not, None when unknown.
    """

    model_config = ConfigDict(frozen=True)
    tool_use_id: str
    name: str
    content: Any = None
    is_error: bool = False
    error_type: str | None = None
    executed: bool | None = None
    additional_context: str | None = None

    @classmethod
    def error(
        cls, call: ToolCall, message: str, error_type: str, *, executed: bool | None = False, **extra: Any
    ) -> ToolResult:
        body = {"error": message, "error_type": error_type, **extra}
        return cls(
            tool_use_id=call.id,
            name=call.name,
            content=body,
            is_error=True,
            error_type=error_type,
            executed=executed,
        )
