"""The agent loop: one user turn in six phases, checkpointed tool batches, resume repair and Verify.

The names below load on first use, so importing a leaf such as ``geode.loop.settings`` (the config schema
does) does not import the loop itself.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from geode.loop.agent import AgenticLoop
    from geode.loop.ports import EventSink, HookOutcome, ListSink, LoopHooks, NoHooks, ToolRunner
    from geode.loop.settings import LoopSettings, VerifySettings
    from geode.loop.snapshot import StepSnapshot, operation_id
    from geode.protocol.turns import TerminationReason, TurnResult

_WHERE = {
    "AgenticLoop": "geode.loop.agent",
    **dict.fromkeys(
        ["EventSink", "HookOutcome", "ListSink", "LoopHooks", "NoHooks", "ToolRunner"], "geode.loop.ports"
    ),
    **dict.fromkeys(["LoopSettings", "VerifySettings"], "geode.loop.settings"),
    **dict.fromkeys(["StepSnapshot", "operation_id"], "geode.loop.snapshot"),
    **dict.fromkeys(["TerminationReason", "TurnResult"], "geode.protocol.turns"),
}
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


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module 'geode.loop' has no attribute {name!r}")
    return getattr(importlib.import_module(_WHERE[name]), name)
