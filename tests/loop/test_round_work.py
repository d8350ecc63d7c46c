"""A tool round costs the loop what its new messages cost, not the whole history (issue 34): the context
estimate measures each message once per turn, the folds over the history (estimate, compaction records,
skills in use) agree with a fold from the start whatever list they are given."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

from geode.conversation import Message, TextBlock, ToolResultBlock, ToolUseBlock
from geode.loop import compaction
from geode.loop.compaction import estimate_tokens
from geode.loop.skills_in_use import skills_in_use
from geode.loop.summarize import ORIGIN, effective_history
from tests.loop.conftest import Rig, tool

K = 12


def _measured(monkeypatch: Any) -> list[int]:
    """Every message the estimate JSON-encodes (its size), counted."""
    sizes: list[int] = []

    def dumps(value: Any, **kw: Any) -> str:
        text = json.dumps(value, **kw)
        sizes.append(len(text))
        return text

    monkeypatch.setattr(compaction, "json", SimpleNamespace(dumps=dumps))
    return sizes


def test_a_turn_of_k_rounds_measures_each_message_once(fake_rig: Rig, monkeypatch: Any) -> None:
    """Before: every round measured the whole history twice (the compactor's check, then the view): 338
    encodes for 12 rounds, O(K²). Now each message the calls send once: 2K + 1, whatever K."""
    sizes = _measured(monkeypatch)
    replies = [{"tool_calls": [tool("read", f"r{i}", key=f"k{i}")]} for i in range(K)]
    result = fake_rig.loop(fake_rig.script(*replies, "done")).run_turn("s-work", "turn-1", "read twelve")
    assert result.text == "done"
    history = fake_rig.records.load_checkpoint("s-work")
    assert history is not None and history.state.message_count == 2 * K + 2
    assert len(sizes) <= 2 * K + 1  # the final answer is never measured: no call follows it


def _round(i: int, *, skill: str = "", failed: bool = False) -> list[Message]:
    name, args = ("use_skill", {"name": skill}) if skill else ("read", {"key": str(i)})
    call = ToolUseBlock(id=f"c{i}", name=name, input=args)
    result = ToolResultBlock(tool_use_id=f"c{i}", content="x" * (i * 7), is_error=failed)
    return [Message(role="assistant", content=(call,)), Message(role="user", content=(result,))]


def _scratch_tokens(messages: list[Message]) -> int:
    chars = sum(len(json.dumps([b.model_dump() for b in m.content], ensure_ascii=False)) for m in messages)
    return chars // compaction.CHARS_PER_TOKEN + 1


def test_the_folds_agree_with_a_fold_from_the_start_whatever_the_list() -> None:
    """Grown, shortened (a popped proposal), replaced (a compacted view) or mixed: the same answers as the
    plain scan of the list given."""
    record = Message(
        role="user",
        content=(TextBlock(text="summary"),),
        metadata={"origin": ORIGIN, "covers": 3, "compaction_id": "c"},
    )
    h: list[Message] = [Message.user_text("go"), *_round(1, skill="pdf"), *_round(2)]
    seen = [list(h)]
    h += _round(3, skill="csv")
    seen.append(list(h))
    seen.append(h[:-1])  # the last message popped (a save that failed)
    h += [record, *_round(4, skill="pdf"), *_round(5, skill="xls", failed=True)]
    seen += [list(h), [h[0], *h[5:]], list(h), h[2:]]
    for messages in seen:
        assert estimate_tokens(messages) == _scratch_tokens(messages)
    assert skills_in_use(h) == ("csv", "pdf")
    assert skills_in_use(h[:3]) == ("pdf",)
    assert skills_in_use(h[:2]) == ()
    view = effective_history(h)
    assert view[0].content[0] == TextBlock(text="summary") and view[1:] == h[3:7] + h[8:]
    assert effective_history(h[:7]) == h[:7]
