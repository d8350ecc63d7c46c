"""A message's JSON size for the token estimate (geode.loop.compaction): counted from pydantic's compact JSON
of its blocks plus the spaces ``json.dumps`` writes, it equals ``len(json.dumps(...))`` of the block dumps
exactly, whatever the blocks hold (escapes, non-ASCII, nesting, floats, a lone surrogate, empty content)."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from geode.conversation import ImageBlock, Message, TextBlock, ToolResultBlock, ToolUseBlock
from geode.loop import compaction
from geode.loop.compaction import _json_chars


def _old(m: Message) -> int:
    return len(json.dumps([b.model_dump() for b in m.content], ensure_ascii=False))


_text = st.text(alphabet=st.characters(codec="utf-8") | st.sampled_from('\n\t"\\/\x00\x1f\x7f\u2028 ,:'))
_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | _text,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_text, inner, max_size=4),
    max_leaves=12,
)
_block = st.one_of(
    st.builds(TextBlock, text=_text),
    st.builds(ToolUseBlock, id=_text, name=_text, input=st.dictionaries(_text, _json, max_size=4)),
    st.builds(ToolResultBlock, tool_use_id=_text, content=_text, is_error=st.booleans()),
    st.builds(
        ImageBlock,
        media_type=_text,
        sha256=st.just("ab" * 32),
        path=_text,
        size=st.integers(min_value=0),
    ),
)


@settings(max_examples=600, deadline=None)
@given(content=st.lists(_block, max_size=4), metadata=st.dictionaries(_text, _json, max_size=2))
def test_chars_equal_json_dumps_of_the_blocks(content: list[Any], metadata: dict[str, Any]) -> None:
    m = Message(role="user", content=tuple(content), metadata=metadata)
    assert _json_chars(m) == _old(m)


def test_a_lone_surrogate_and_a_tuple_input_are_measured_as_before() -> None:
    for m in (
        Message(role="user", content=(ToolResultBlock(tool_use_id="t", content="a\ud800b"),)),
        Message(role="assistant", content=(ToolUseBlock(id="t", name="n", input={"x": (1, 2.5e-05)}),)),
        Message(role="assistant", content=(ToolUseBlock(id="t", name="n", input={"x": {"y": 1e-07}}),)),
        Message(role="user", content=()),
    ):
        assert _json_chars(m) == _old(m)


def test_a_long_tool_result_is_not_encoded_by_json_dumps(monkeypatch: Any) -> None:
    """The fast path is the one taken for an ordinary tool result (json.dumps would be ~3x the CPU)."""
    calls: list[Any] = []
    monkeypatch.setattr(compaction.json, "dumps", lambda *a, **k: calls.append(a) or "")
    text = "".join(f"{i:6d}\tline {i} of the file é\n" for i in range(200))
    m = Message(role="user", content=(ToolResultBlock(tool_use_id="toolu_1", content=text),))
    n = _json_chars(m)
    monkeypatch.undo()
    assert calls == [] and n == _old(m)
