"""StepSnapshot: what one model call was bound to (model, provider, adapter, plan, correlation ids)."""

from __future__ import annotations

import hashlib
from functools import lru_cache

from pydantic import BaseModel, ConfigDict

from geode.tools.plan import BoundToolPlan
from geode.tools.spec import ToolCall, ToolContext


# asked 3 times a call (its pending save, its context, its result metadata), all while its batch runs: 256
# covers a worker's two turns' batches at the per-reply cap (64 each); an entry with its 4 ids ~0.5 KiB,
# so 1,024 held ~0.5 MiB of finished calls' ids a worker (filled over its first ~2,000 tool calls in a soak)
@lru_cache(maxsize=256)
def operation_id(session_id: str, turn_id: str, step_id: str, tool_use_id: str) -> str:
    """Deterministic operation id of one tool_use: the same call always maps to the same receipt."""
    raw = "\x1f".join((session_id, turn_id, step_id, tool_use_id)).encode()
    return "op-" + hashlib.sha256(raw).hexdigest()[:32]


def skips_permissions(mode: str, flag: bool) -> bool:
    """The turn's skip flag counts only where a person could have been asked (IPC, REPL)."""
    return bool(flag) and mode in ("IPC", "REPL")


class StepSnapshot(BaseModel):
    """Frozen per model call; the tool calls it produced execute against exactly this snapshot."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)
    session_id: str
    turn_id: str
    step_index: int
    round_index: int
    model: str
    provider: str
    adapter: str
    plan: BoundToolPlan | None = None  # None when tools are off for this call
    tool_choice: str = "auto"
    verify_attempt: int = 0
    mode: str = "IPC"
    origin: str = ""
    workspace: str = ""
    skip_permissions: bool = False  # the turn's own flag (never a connection's)
    granted_tools: tuple[str, ...] = ()  # AUTOMATION: the operator job's explicit tools
    scope: str = ""  # the session's scope (geode.memory.scopes)
    skills: tuple[str, ...] = ()  # the skills in use (geode.loop.skills_in_use)

    @property
    def step_id(self) -> str:
        return f"{self.turn_id}:step-{self.step_index}"

    @property
    def plan_hash(self) -> str:
        return self.plan.content_hash if self.plan is not None else ""

    @property
    def plan_generation(self) -> int:
        return self.plan.generation if self.plan is not None else 0

    def correlation(self) -> dict[str, str]:
        return {"session_id": self.session_id, "turn_id": self.turn_id, "step_id": self.step_id}

    def operation_id(self, tool_use_id: str) -> str:
        return operation_id(self.session_id, self.turn_id, self.step_id, tool_use_id)

    def tool_context(self, call: ToolCall, *, deadline_ms: int | None = None) -> ToolContext:
        return ToolContext(
            session_id=self.session_id,
            turn_id=self.turn_id,
            step_id=self.step_id,
            operation_id=self.operation_id(call.id),
            mode=self.mode,
            model=self.model,
            provider=self.provider,
            adapter=self.adapter,
            plan_hash=self.plan_hash,
            plan_generation=self.plan_generation,
            origin=self.origin,
            workspace=self.workspace,
            deadline_ms=deadline_ms,
            skip_permissions=skips_permissions(self.mode, self.skip_permissions),
            granted_tools=self.granted_tools,
            scope=self.scope,
            skills=self.skills,
        )
