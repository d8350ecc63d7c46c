"""Fixtures: a scripted server per test and adapters pointed at it through the real SDK clients."""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest

from geode.conversation import Message
from geode.providers.adapter_base import Endpoint, WireAdapter
from geode.providers.events import ProviderEvent
from geode.providers.retry import Retrier
from geode.providers.types import ModelRequest, SystemSection, ToolSchema
from geode.providers.vendors import make_adapter
from geode.testing.scripted import ScriptedServer

WIRES = ("anthropic-messages", "openai-chat", "openai-responses")
MODELS = {"anthropic-messages": "claude-opus-5-5", "openai-chat": "glm-5.3", "openai-responses": "gpt-6-sol"}

WEATHER = ToolSchema(
    name="get_weather",
    description="Weather for a city",
    input_schema={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)


@dataclass
class FakeTime:
    """Injectable sleep: records delays instead of sleeping."""

    slept: list[float] = field(default_factory=list)

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    srv = ScriptedServer().start()
    try:
        yield srv
    finally:
        srv.stop()


@pytest.fixture
def fake_time() -> FakeTime:
    return FakeTime()


@pytest.fixture
def events() -> list[ProviderEvent]:
    return []


def base_url_for(wire: str, server: ScriptedServer) -> str:
    return server.base_url if wire == "anthropic-messages" else server.openai_base_url


def build(
    wire: str,
    server: ScriptedServer,
    fake_time: FakeTime,
    events: list[ProviderEvent] | None = None,
    **endpoint_kw: object,
) -> WireAdapter:
    endpoint = Endpoint(
        provider=wire.split("-")[0],
        base_url=base_url_for(wire, server),
        api_key="sk-test-secret",
        **endpoint_kw,
    )  # type: ignore[arg-type]
    retrier = Retrier(
        sleep=fake_time.sleep, rng=random.Random(7), on_event=events.append if events is not None else None
    )
    return make_adapter(wire, endpoint, retrier=retrier)  # type: ignore[arg-type]


def request(
    wire: str,
    *,
    stream: bool = True,
    tools: bool = True,
    text: str = "What is the weather in Oslo?",
    system: tuple[SystemSection, ...] = (),
) -> ModelRequest:
    return ModelRequest(
        model=MODELS[wire],
        system=system,
        messages=(Message.user_text(text),),
        tools=(WEATHER,) if tools else (),
        stream=stream,
        max_tokens=1024,
    )
