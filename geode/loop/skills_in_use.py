"""Which skills a session has in use: those whose ``use_skill`` call succeeded in its history (the executor
finds each again by name; geode/tools/skill_scope.py). Derived from the durable history, so a resumed
session, a restarted worker or executor sees the same skills; a skill whose call compaction dropped from
the history is no longer in use."""

from __future__ import annotations

from collections.abc import Sequence

from geode.conversation import Message, ToolResultBlock, ToolUseBlock
from geode.loop.history_fold import HistoryFold

USE_SKILL = "use_skill"


def skills_in_use(history: Sequence[Message]) -> tuple[str, ...]:
    """The names, each once, ordered by their last successful ``use_skill`` (the last used at the end)."""
    return _SKILLS(history)[1]


Skills = tuple[dict[str, str], tuple[str, ...]]


def _step(state: Skills, msg: Message) -> Skills:
    """``state``: (use_skill call id -> skill name, not answered yet; the names in use). Never changed in
    place (a :class:`HistoryFold` keeps it)."""
    asked, used = state
    for block in msg.content:
        if isinstance(block, ToolUseBlock) and block.name == USE_SKILL:
            name = block.input.get("name")
            if isinstance(name, str) and name:
                asked = {**asked, block.id: name}
        elif isinstance(block, ToolResultBlock) and not block.is_error and block.tool_use_id in asked:
            asked = dict(asked)
            name = asked.pop(block.tool_use_id)
            used = (*(u for u in used if u != name), name)
    return asked, used


_SKILLS: HistoryFold[Skills] = HistoryFold(lambda: ({}, ()), _step)
