"""The OpenAI adapters (Chat Completions, Responses) encode each message once per turn (issue 34): round
``n + 1`` re-sends round ``n``'s messages already encoded, the body the server reads is the one
``build_body`` describes (its history arrays byte for byte), and a picture is still verified per request."""

from __future__ import annotations

import json
import types
from pathlib import Path
from typing import Any

import pytest

from geode.conversation import Message, TextBlock, ToolResultBlock, ToolUseBlock
from geode.providers import openai_chat, openai_responses
from geode.providers.adapter_base import Joined
from geode.providers.types import ModelRequest, SystemSection
from geode.testing.scenario import Scenario
from tests.providers.conftest import WEATHER, build
from tests.providers.test_images import VISION, _image, _texts

WIRES = {"openai-chat": (openai_chat, "messages"), "openai-responses": (openai_responses, "input")}
MODELS = {"openai-chat": "glm-5.3", "openai-responses": "gpt-6-sol"}
SYSTEM = (SystemSection(name="base", text="You are GEODE ✓", cache_boundary=True),)


def _round(i: int) -> list[Message]:
    call = ToolUseBlock(id=f"call_{i}", name="get_weather", input={"city": f"Oslo-{i}", "ü": "ß"})
    result = ToolResultBlock(tool_use_id=f"call_{i}", content=json.dumps({"temp": i, "sky": "☁"}))
    said = TextBlock(text=f"round {i} «done»")
    return [Message(role="assistant", content=(said, call)), Message(role="user", content=(result,))]


def _spliced_array(adapter: Any, req: ModelRequest, key: str) -> bytes:
    """The array the request body carries under ``key``, as the body encoder writes it."""
    value = adapter.wire_body(req)[key]
    if isinstance(value, Joined):  # already joined, in pieces
        return b"[" + b"".join(value) + b"]"
    if all(isinstance(v, bytes) for v in value):
        return b"[" + b", ".join(value) + b"]"
    return json.dumps(value, ensure_ascii=False).encode()  # a plain list (the body encoder's own)


@pytest.mark.parametrize("wire", WIRES)
def test_each_tool_call_is_encoded_once_per_turn_and_the_body_is_unchanged(
    wire, server, fake_time, monkeypatch
):
    """12 requests of a growing history: the old adapters encoded the arguments of every earlier tool call
    again in each request (0 + 1 + … + 11 = 66 times); now each call's once (11)."""
    module, key = WIRES[wire]
    inputs: dict[int, dict[str, Any]] = {}
    encoded: list[int] = []

    def counting_dumps(value: Any, **kw: Any) -> str:
        if id(value) in inputs and inputs[id(value)] is value:
            encoded.append(id(value))
        return json.dumps(value, **kw)

    monkeypatch.setattr(module, "json", types.SimpleNamespace(dumps=counting_dumps, loads=json.loads))
    server.set_scenario(Scenario.of(*["ok"] * 12))
    adapter = build(wire, server, fake_time)
    history = [Message.user_text("weather, one city a round")]
    for i in range(12):
        req = ModelRequest(
            model=MODELS[wire],
            system=SYSTEM,
            messages=tuple(history),
            tools=(WEATHER,),
            metadata={"session_id": "s-enc", "turn_id": "t", "step_id": str(i)},
        )
        adapter.complete(req)
        counted = len(encoded)
        expected = adapter.build_body(req)  # the dict the request must equal (it projects again: not counted)
        assert server.requests[-1].body == json.loads(json.dumps(expected))
        assert _spliced_array(adapter, req, key) == json.dumps(expected[key], ensure_ascii=False).encode()
        del encoded[counted:]
        history += _round(i)
        inputs.update({id(b.input): b.input for b in history[-2].tool_uses})
    assert len(encoded) == 11  # the calls of rounds 0..10, each once
    assert len(set(encoded)) == 11


@pytest.mark.parametrize("wire", WIRES)
def test_interleaved_sessions_and_a_shorter_history_are_sent_whole(wire, server, fake_time):
    """Two conversations, a history that is not the last one plus new messages (a compacted view, a retried
    turn), an empty message and a tools list changed mid-turn are all sent as ``build_body`` describes."""
    key = WIRES[wire][1]
    server.set_scenario(Scenario.of(*["ok"] * 7))
    adapter = build(wire, server, fake_time)
    a = [Message.user_text("a"), *_round(1)]
    b = [
        Message.user_text("b"),
        *_round(2),
        Message(role="assistant", content=(TextBlock(text=""),)),
        *_round(3),
    ]
    other_tool = WEATHER.model_copy(update={"name": "get_rain"})
    sent = [
        ("s-a", a, (WEATHER,)),
        ("s-b", b, (WEATHER,)),
        ("s-a", [*a, *_round(4)], (WEATHER, other_tool)),
        ("s-a", [*a, *_round(6)], (other_tool, WEATHER)),
        ("s-b", b[:1], ()),
        ("s-b", [b[0], *_round(5)], (other_tool,)),
        ("", [Message.user_text("no session")], (WEATHER,)),
    ]
    for session, messages, tools in sent:
        req = ModelRequest(
            model=MODELS[wire],
            system=SYSTEM,
            messages=tuple(messages),
            tools=tools,
            metadata={"session_id": session},
        )
        adapter.complete(req)
        expected = json.loads(json.dumps(adapter.build_body(req)))
        assert server.requests[-1].body == expected
        assert _spliced_array(adapter, req, key) == json.dumps(expected[key], ensure_ascii=False).encode()


@pytest.mark.parametrize("wire", WIRES)
def test_a_picture_is_verified_on_every_request(wire, server, fake_time, tmp_path: Path):
    """The message with the picture is sent again next round: a file changed meanwhile becomes the note."""
    server.set_scenario(Scenario.of("ok", "ok"))
    adapter = build(wire, server, fake_time)
    block = _image(tmp_path)
    history = [Message(role="user", content=(TextBlock(text="look"), block))]
    meta = {"session_id": "s-img"}
    adapter.complete(ModelRequest(model=VISION[wire], messages=tuple(history), metadata=meta))
    assert server.requests[-1].images
    Path(block.path).write_bytes(b"something else")
    history += [Message(role="assistant", content=(TextBlock(text="a cat"),)), Message.user_text("again")]
    adapter.complete(ModelRequest(model=VISION[wire], messages=tuple(history), metadata=meta))
    assert server.requests[-1].images == []
    assert "cat.png" in _texts(server.requests[-1].body)


@pytest.mark.parametrize("wire", WIRES)
@pytest.mark.parametrize("field", ["history", "tools", "tool_choice"])
def test_an_endpoint_extra_body_still_replaces_the_history_or_tools(wire, field, server, fake_time):
    key = {"history": WIRES[wire][1]}.get(field, field)
    extra = {"tools": [], "tool_choice": "none"}.get(key, [{"role": "user", "content": "x"}])
    adapter = build(wire, server, fake_time)
    adapter.endpoint.options["extra_body"] = {key: extra}
    server.set_scenario(Scenario.of("ok"))
    req = ModelRequest(model=MODELS[wire], messages=(Message.user_text("hi"),), tools=(WEATHER,))
    adapter.complete(req)
    assert server.requests[-1].body[key] == extra
