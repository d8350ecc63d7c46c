"""A turn's requests encode each message once (issue 34): round ``n + 1`` re-sends round ``n``'s messages
already encoded, and the body the server reads is the one ``build_body`` describes; a picture is still read
and verified on every request."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from geode.conversation import Message, TextBlock, ToolResultBlock, ToolUseBlock
from geode.providers import anthropic_messages
from geode.providers.types import ModelRequest
from geode.testing.scenario import Scenario
from tests.providers.conftest import WEATHER, build
from tests.providers.test_images import _image, _texts

WIRE = "anthropic-messages"
MODEL = "claude-opus-5-5"


def _round(i: int) -> list[Message]:
    call = ToolUseBlock(id=f"call_{i}", name="get_weather", input={"city": f"Oslo-{i}", "ü": "ß"})
    result = ToolResultBlock(tool_use_id=f"call_{i}", content=json.dumps({"temp": i, "sky": "☁"}))
    return [Message(role="assistant", content=(call,)), Message(role="user", content=(result,))]


def test_each_message_is_encoded_once_per_turn_and_the_body_is_unchanged(server, fake_time, monkeypatch):
    """12 requests: the old adapter projected 1 + 3 + … + 23 = 144 messages; now 23, one per message."""
    projected: list[Message] = []
    real = anthropic_messages.message_param

    def counting(message: Message, model: str = "") -> dict:
        projected.append(message)
        return real(message, model)

    monkeypatch.setattr(anthropic_messages, "message_param", counting)
    server.set_scenario(Scenario.of(*["ok"] * 12))
    adapter = build(WIRE, server, fake_time)
    history = [Message.user_text("weather, one city a round")]
    for i in range(12):
        req = ModelRequest(
            model=MODEL,
            messages=tuple(history),
            tools=(WEATHER,),
            metadata={"session_id": "s-enc", "turn_id": "t", "step_id": str(i)},
        )
        adapter.complete(req)
        projected_before = len(projected)
        expected = adapter.build_body(req)  # the dict the request must equal (it projects again: not counted)
        del projected[projected_before:]
        assert server.requests[-1].body == json.loads(json.dumps(expected))
        history += _round(i)
    assert len(projected) == 23  # the first message, then the two new ones of each round
    assert len({id(m) for m in projected}) == 23


def test_two_sessions_and_a_shorter_history_are_encoded_right(server, fake_time):
    """Interleaved conversations and a history that is not the last one plus new messages (a compacted
    view, a retried turn) are sent whole and correct."""
    server.set_scenario(Scenario.of(*["ok"] * 5))
    adapter = build(WIRE, server, fake_time)
    a = [Message.user_text("a"), *_round(1)]
    b = [Message.user_text("b"), *_round(2), *_round(3)]
    sent = [("s-a", a), ("s-b", b), ("s-a", [*a, *_round(4)]), ("s-b", b[:1]), ("s-b", [b[0], *_round(5)])]
    for session, messages in sent:
        req = ModelRequest(model=MODEL, messages=tuple(messages), metadata={"session_id": session})
        adapter.complete(req)
        assert (
            server.requests[-1].body["messages"]
            == json.loads(json.dumps(adapter.build_body(req)))["messages"]
        )


def test_a_picture_is_verified_on_every_request(server, fake_time, tmp_path: Path):
    """The message with the picture is sent again next round: a file changed meanwhile becomes the note."""
    server.set_scenario(Scenario.of("ok", "ok"))
    adapter = build(WIRE, server, fake_time)
    block = _image(tmp_path)
    history = [Message(role="user", content=(TextBlock(text="look"), block))]
    adapter.complete(ModelRequest(model=MODEL, messages=tuple(history), metadata={"session_id": "s-img"}))
    assert server.requests[-1].images
    Path(block.path).write_bytes(b"something else")
    history += [Message(role="assistant", content=(TextBlock(text="a cat"),)), Message.user_text("again")]
    adapter.complete(ModelRequest(model=MODEL, messages=tuple(history), metadata={"session_id": "s-img"}))
    assert server.requests[-1].images == []
    assert "cat.png" in _texts(server.requests[-1].body)


@pytest.mark.parametrize("extra", [{"tools": []}, {"messages": [{"role": "user", "content": "x"}]}])
def test_an_endpoint_extra_body_still_replaces_the_messages_or_tools(server, fake_time, extra):
    adapter = build(WIRE, server, fake_time)
    adapter.endpoint.options["extra_body"] = extra
    server.set_scenario(Scenario.of("ok"))
    req = ModelRequest(model=MODEL, messages=(Message.user_text("hi"),), tools=(WEATHER,))
    adapter.complete(req)
    for key, value in extra.items():
        assert server.requests[-1].body[key] == value
