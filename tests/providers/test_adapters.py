"""Every wire adapter against the scripted server through the real SDK: text, tool calls, deltas, usage."""

from __future__ import annotations

import json

import pytest

from geode.conversation import Message, TextBlock, ToolResultBlock, ToolUseBlock
from geode.providers.types import StopReason, SystemSection
from geode.testing.scenario import Scenario, ScriptedReply, ScriptedToolCall, ScriptedUsage
from tests.providers.conftest import MODELS, WIRES, build, request

pytestmark = pytest.mark.parametrize("wire", WIRES)


@pytest.mark.parametrize("stream", [True, False])
def test_plain_text(wire, server, fake_time, stream):
    server.set_scenario(Scenario.of("Hello from the scripted model"))
    deltas: list[str] = []
    resp = build(wire, server, fake_time).complete(request(wire, stream=stream, tools=False), deltas.append)
    assert resp.text == "Hello from the scripted model"
    assert resp.tool_calls == ()
    assert resp.stop_reason is StopReason.END_TURN
    assert resp.attempts == 1
    assert (deltas == ["Hello ", "from ", "the ", "scripted ", "model"]) is stream
    (rec,) = server.requests
    assert rec.stream is stream
    assert rec.headers["authorization"].startswith("<redacted:")
    assert "sk-test-secret" not in rec.model_dump_json()
    assert rec.body["model"] == MODELS[wire]


@pytest.mark.parametrize("stream", [True, False])
def test_one_tool_call(wire, server, fake_time, stream):
    server.set_scenario(
        Scenario.of({"tool_calls": [{"id": "call_a", "name": "get_weather", "input": {"city": "Oslo"}}]})
    )
    resp = build(wire, server, fake_time).complete(request(wire, stream=stream))
    assert resp.stop_reason is StopReason.TOOL_USE
    assert resp.tool_calls == (ToolUseBlock(id="call_a", name="get_weather", input={"city": "Oslo"}),)
    body = server.requests[0].body
    if wire == "anthropic-messages":
        assert body["tools"] == [
            {
                "name": "get_weather",
                "description": "Weather for a city",
                "input_schema": body["tools"][0]["input_schema"],
            }
        ]
    elif wire == "openai-chat":
        assert body["tools"][0]["type"] == "function"
        assert body["tools"][0]["function"]["name"] == "get_weather"
        assert body["tools"][0]["function"]["parameters"]["required"] == ["city"]
    else:
        assert body["tools"][0] == {
            "type": "function",
            "name": "get_weather",
            "description": "Weather for a city",
            "parameters": body["tools"][0]["parameters"],
        }


@pytest.mark.parametrize("stream", [True, False])
def test_several_tool_calls_with_text(wire, server, fake_time, stream):
    calls = [ScriptedToolCall(name="get_weather", input={"city": c}) for c in ("Oslo", "Rome", "Lima")]
    server.set_scenario(
        Scenario(replies=(ScriptedReply(text="Checking three cities. ", tool_calls=tuple(calls)),))
    )
    deltas: list[str] = []
    resp = build(wire, server, fake_time).complete(request(wire, stream=stream), deltas.append)
    assert [c.input["city"] for c in resp.tool_calls] == ["Oslo", "Rome", "Lima"]
    assert len({c.id for c in resp.tool_calls}) == 3
    assert resp.text == "Checking three cities. "
    assert "".join(deltas) == (resp.text if stream else "")


def test_streaming_deltas_arrive_in_order(wire, server, fake_time):
    chunks = tuple(f"<{i}>" for i in range(40))
    server.set_scenario(Scenario(replies=(ScriptedReply(text="".join(chunks), chunks=chunks),)))
    deltas: list[str] = []
    resp = build(wire, server, fake_time).complete(request(wire, tools=False), deltas.append)
    assert deltas == list(chunks)
    assert resp.text == "".join(chunks)


@pytest.mark.parametrize("stream", [True, False])
def test_usage_recorded(wire, server, fake_time, stream):
    usage = ScriptedUsage(input_tokens=321, output_tokens=45, cache_read_tokens=200, cache_write_tokens=17)
    server.set_scenario(Scenario(replies=(ScriptedReply(text="ok", usage=usage),)))
    resp = build(wire, server, fake_time).complete(request(wire, stream=stream))
    assert (resp.usage.input_tokens, resp.usage.output_tokens) == (321, 45)
    assert resp.usage.cache_read_tokens == 200
    if wire != "openai-chat":  # Chat Completions reports no cache writes
        assert resp.usage.cache_write_tokens == 17


def test_max_tokens_stop_reason(wire, server, fake_time):
    raw = {
        "anthropic-messages": "max_tokens",
        "openai-chat": "length",
        "openai-responses": "max_output_tokens",
    }[wire]
    server.set_scenario(Scenario(replies=(ScriptedReply(text="trunc", stop_reason=raw),)))
    resp = build(wire, server, fake_time).complete(request(wire))
    assert resp.stop_reason is StopReason.MAX_TOKENS


def test_conversation_with_tool_results_is_projected(wire, server, fake_time):
    server.set_scenario(Scenario.of("It is sunny in Oslo."))
    history = (
        Message.user_text("Weather in Oslo?"),
        Message(
            role="assistant",
            content=(
                TextBlock(text="Let me check."),
                ToolUseBlock(id="call_1", name="get_weather", input={"city": "Oslo"}),
            ),
        ),
        Message(role="user", content=(ToolResultBlock(tool_use_id="call_1", content='{"sky": "sunny"}'),)),
    )
    system = (
        SystemSection(name="base", text="You are GEODE.", cache_boundary=True),
        SystemSection(name="turn", text="Today is Wednesday."),
    )
    req = request(wire, system=system).model_copy(update={"messages": history})
    resp = build(wire, server, fake_time).complete(req)
    assert resp.text == "It is sunny in Oslo."
    body = server.requests[0].body
    dumped = json.dumps(body)
    assert "call_1" in dumped and "sunny" in dumped
    if wire == "anthropic-messages":
        assert body["system"] == [
            {"type": "text", "text": "You are GEODE.", "cache_control": {"type": "ephemeral"}},
            {"type": "text", "text": "Today is Wednesday."},
        ]
        assert body["messages"][1]["content"][1] == {
            "type": "tool_use",
            "id": "call_1",
            "name": "get_weather",
            "input": {"city": "Oslo"},
        }
        assert body["messages"][2]["content"][0]["type"] == "tool_result"
    elif wire == "openai-chat":
        assert body["messages"][0] == {"role": "system", "content": "You are GEODE.\n\nToday is Wednesday."}
        assert body["messages"][2]["tool_calls"][0]["function"]["arguments"] == '{"city": "Oslo"}'
        assert body["messages"][3] == {
            "role": "tool",
            "tool_call_id": "call_1",
            "content": '{"sky": "sunny"}',
        }
    else:
        assert body["instructions"] == "You are GEODE.\n\nToday is Wednesday."
        kinds = [item.get("type", item.get("role")) for item in body["input"]]
        assert kinds == ["user", "assistant", "function_call", "function_call_output"]
