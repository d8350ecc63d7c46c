"""A stream event's data and a tool call's arguments are read by pydantic-core's JSON parser: the value (or
the error) is what ``json.loads`` gives, whatever the text."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from geode.providers.adapter_base import Encoded, body_chunks, json_args
from geode.providers.sse_events import json_value

EDGES = [
    '"\\ud800"',  # a lone surrogate escape: json.loads keeps it, pydantic-core refuses it
    '{"a": "\\udc00x", "b": 1}',
    '{"a":1,"a":2}',
    '{"a":1,"b":2,"a":3}',  # a repeated key: the last value, at the first one's place
    "[NaN, Infinity, -Infinity]",
    "12345678901234567890123456789",
    '{"x": 0.1234567890123456789, "y": 1e400, "z": -0.0}',
    '"\\u0000\\/\\"\\\\"',
    '{"emoji": "\\ud83d\\ude00 \u00e9"}',
    "  {} ",
]
MALFORMED = ["", " ", "[1,]", '{"a":1,}', "1 2", "\ufeff{}", "'a'", "nan", "01", "1.", '"a\tb"', '{"a":1} x']

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return (math.isnan(a) and math.isnan(b)) or (a == b and math.copysign(1, a) == math.copysign(1, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(map(_same, a, b))
    return type(a) is type(b) and a == b


@pytest.mark.parametrize("text", EDGES)
def test_edge_texts_read_as_json_loads_reads_them(text: str) -> None:
    assert _same(json_value(text), json.loads(text))


@pytest.mark.parametrize("text", MALFORMED)
def test_malformed_text_raises_json_loads_error(text: str) -> None:
    with pytest.raises(json.JSONDecodeError) as caught:
        json_value(text)
    with pytest.raises(json.JSONDecodeError) as expected:
        json.loads(text)
    assert str(caught.value) == str(expected.value)
    assert json_args(text) == ({} if not text else {"_raw": text})


@settings(max_examples=300, deadline=None)
@given(JSON, st.booleans())
def test_any_json_text_reads_as_json_loads_reads_it(value: Any, ascii_only: bool) -> None:
    text = json.dumps(value, ensure_ascii=ascii_only)
    assert _same(json_value(text), json.loads(text))


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.text(max_size=8), JSON, max_size=5), st.lists(st.binary(max_size=8), max_size=3))
def test_a_body_is_the_text_json_dumps_wrote(rest: dict[str, Any], pieces: list[bytes]) -> None:
    """body_chunks' encoder made once and its spliced keys' heads kept: the bytes json.dumps gave."""
    assert body_chunks(rest) == [json.dumps(rest, ensure_ascii=False).encode()]
    parts = [json.dumps(p.hex()).encode() for p in pieces] or [b"1"]
    body = {**rest, "tools": Encoded(parts)}
    want = json.dumps({**rest, "tools": [json.loads(p) for p in parts]}, ensure_ascii=False)
    assert json.loads(b"".join(body_chunks(body))) == json.loads(want)
    head = json.dumps(rest, ensure_ascii=False)[:-1] if rest else "{"
    assert b"".join(body_chunks(body)).startswith(head.encode())


def test_a_streamed_reply_runs_no_python_json_decoder() -> None:
    """Each event of a streamed reply was 3 Python calls of json.loads (loads, decode, raw_decode): none."""
    import sys
    import threading

    from geode.conversation import Message
    from geode.providers.types import ModelRequest
    from geode.testing.scenario import Scenario
    from geode.testing.scripted import ScriptedServer
    from tests.providers.conftest import WEATHER, FakeTime, build

    with ScriptedServer() as server:
        server.set_scenario(
            Scenario.of(*[{"tool_calls": [{"name": "get_weather", "input": {"city": "Oslo"}}]}] * 3)
        )
        adapter = build("anthropic-messages", server, FakeTime())
        req = ModelRequest(model="claude-opus-5-5", messages=(Message.user_text("x"),), tools=(WEATHER,))
        adapter.complete(req)
        me, seen = threading.get_ident(), []

        def prof(frame: Any, event: str, arg: Any) -> None:
            if (
                event == "call"
                and threading.get_ident() == me
                and frame.f_code.co_filename.endswith("decoder.py")
            ):
                seen.append(frame.f_code.co_name)

        sys.setprofile(prof)
        try:
            response = adapter.complete(req)
        finally:
            sys.setprofile(None)
    assert [c.input for c in response.tool_calls] == [{"city": "Oslo"}]
    assert seen == []
