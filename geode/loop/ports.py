"""What the loop needs from its collaborators (executor client, event sink, hooks), as minimal Protocols."""

from __future__ import annotations

from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field

from geode.protocol.turns import TurnEvent
from geode.tools.plan import BoundToolPlan
from geode.tools.spec import ToolCall, ToolContext, ToolResult


class ToolRunner(Protocol):
    """The executor as the loop sees it (``geode.tools.executor_client.ExecutorClient`` fits)."""

    def bind_plan(self, plan: BoundToolPlan) -> Any: ...

    def execute(self, ctx: ToolContext, call: ToolCall) -> ToolResult: ...


class EventSink(Protocol):
    """Where turn events go (the loop worker casts them to lanes; tests collect them)."""

    def emit(self, event: TurnEvent) -> None: ...


class HookOutcome(BaseModel):
    """A hook chain's decision. ``action`` values per hook: see :class:`LoopHooks`."""

    model_config = ConfigDict(frozen=True)
    action: str = "continue"
    reason: str = ""
    instruction: str = ""
    updates: dict[str, Any] = Field(default_factory=dict)


VerifyAction = Literal["accept", "revise", "escalate"]


class LoopHooks(Protocol):
    """Public hooks the loop consults.

    user_prompt_submit → continue | rewrite (updates.prompt) | block; post_verify → accept | revise | escalate
    (or "continue" = no decision); stop → finalize | continue (with instruction).
    """

    def user_prompt_submit(self, payload: dict[str, Any], correlation: dict[str, str]) -> HookOutcome: ...

    def post_verify(self, payload: dict[str, Any], correlation: dict[str, str]) -> HookOutcome: ...

    def stop(self, payload: dict[str, Any], correlation: dict[str, str]) -> HookOutcome: ...


class NoHooks:
    """No handlers registered: every hook continues."""

    def user_prompt_submit(self, payload: dict[str, Any], correlation: dict[str, str]) -> HookOutcome:
        return HookOutcome()

    def post_verify(self, payload: dict[str, Any], correlation: dict[str, str]) -> HookOutcome:
        return HookOutcome()

    def stop(self, payload: dict[str, Any], correlation: dict[str, str]) -> HookOutcome:
        return HookOutcome(action="finalize")


class ListSink:
    """An event sink that keeps everything (tests, single-process runs)."""

    def __init__(self) -> None:
        self.events: list[TurnEvent] = []

    def emit(self, event: TurnEvent) -> None:
        self.events.append(event)

    def kinds(self) -> list[str]:
        return [e.kind.value for e in self.events]
