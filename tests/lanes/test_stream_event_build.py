"""Lanes' stream buffer builds each ``StreamEvent`` without a pydantic pass: the same model as the validating
constructor, the same errors for what the model refuses."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from geode.lanes.stream import StreamBuffer
from geode.protocol import catalog
from geode.protocol.lanes import StreamEvent, StreamEvents, event_wire, stream_event


@pytest.mark.parametrize(
    "data",
    [{}, {"name": "glob_files", "input": {"pattern": "*.py"}}, {"result": {"text": "done", "usage": [1, 2]}}],
)
def test_built_as_the_constructor_would(data: dict) -> None:
    fast = stream_event("s-1", "t-1", 17_000_000_000_001, "tool_start", data)
    slow = StreamEvent(session_id="s-1", turn_id="t-1", seq=17_000_000_000_001, kind="tool_start", data=data)
    assert fast == slow
    assert fast.model_fields_set == slow.model_fields_set
    assert fast.model_dump() == slow.model_dump() == event_wire(fast)
    assert catalog.dump(fast) == catalog.dump(slow)
    assert fast.data is not data  # copied, as validation copies it
    assert StreamEvents(events=[fast]).events[0] == slow
    assert StreamEvent.model_validate(fast.model_dump()) == fast


@pytest.mark.parametrize(
    "args",
    [
        ("s-1", "t-1", 0, "tool_start", {}),  # seq < 1
        ("s-1", "t-1", 5, "k" * 65, {}),  # kind too long
        ("s-1", "t-1", 5, "tool_start", ["not", "a", "dict"]),
        (None, "t-1", 5, "tool_start", {}),
    ],
)
def test_refused_as_before(args: tuple) -> None:
    with pytest.raises(ValidationError):
        stream_event(*args)


def test_buffer_numbers_and_keeps_built_events() -> None:
    buf = StreamBuffer(start_ms=1)
    a = buf.append("s-1", "t-1", "turn_queued", {"position": 0})
    b = buf.append("s-1", "t-1", "turn_started", {"worker": "loop-1"})
    assert (a.seq, b.seq) == (1_000_001, 1_000_002)
    assert buf.since("s-1", a.seq) == ([b], True)
    assert b == StreamEvent(
        session_id="s-1", turn_id="t-1", seq=b.seq, kind="turn_started", data={"worker": "loop-1"}
    )


def test_a_built_event_takes_an_attribute_set_as_a_validated_one_does() -> None:
    """pydantic adds a set attribute's name to the model's own fields-set: each event has its own set."""
    a, b = stream_event("s-1", "t-1", 1, "text", {}), stream_event("s-1", "t-1", 2, "text", {})
    a.kind = "tool_start"
    assert a.kind == "tool_start" and b.kind == "text"
    assert a.model_fields_set == b.model_fields_set == StreamEvent(**b.model_dump()).model_fields_set
