"""The agent loop: one user turn in six phases, checkpointed tool batches, resume repair and Verify."""

from geode.loop.agent import AgenticLoop
from geode.loop.ports import EventSink, HookOutcome, ListSink, LoopHooks, NoHooks, ToolRunner
from geode.loop.settings import LoopSettings, VerifySettings
from geode.loop.snapshot import StepSnapshot, operation_id
from geode.protocol.turns import TerminationReason, TurnResult

__all__ = [
    "AgenticLoop",
    "EventSink",
    "HookOutcome",
    "ListSink",
    "LoopHooks",
    "LoopSettings",
    "NoHooks",
    "StepSnapshot",
    "TerminationReason",
    "ToolRunner",
    "TurnResult",
    "VerifySettings",
    "operation_id",
]
