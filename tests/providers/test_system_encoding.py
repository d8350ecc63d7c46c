"""The system prompt's blocks are encoded once per text (issue 34, session 4): the loop rebuilds the prompt
for every call (new section objects, the same ~16 KB of stable text), and each request used to encode it
all to JSON again; the body the server reads is still ``build_body``'s, an edited text is sent at once."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

from geode.conversation import Message
from geode.providers import adapter_base, encoded_blocks
from geode.providers.types import ModelRequest, SystemSection
from geode.testing.scenario import Scenario
from tests.providers.conftest import WEATHER, build

WIRE = "anthropic-messages"
MODEL = "claude-opus-5-5"
STABLE = "## identity\nYou are GEODE, ünïcode kept. " * 400


def _counting(monkeypatch: Any, marker: str) -> list[int]:
    """Every JSON encoding (adapter body or block) whose output holds ``marker``, counted."""
    hits: list[int] = []

    def dumps(value: Any, **kw: Any) -> str:
        text = json.dumps(value, **kw)
        if marker in text:
            hits.append(1)
        return text

    for module in (adapter_base, encoded_blocks):
        monkeypatch.setattr(module, "json", SimpleNamespace(dumps=dumps, loads=json.loads))
    return hits


def _system(stable: str, i: int) -> tuple[SystemSection, ...]:
    return (
        SystemSection(name="agent_identity", text=stable),
        SystemSection(name="tool_contract", text="Use tools carefully.", cache_boundary=True),
        SystemSection(name="dynamic_context", text=f"round {i} of 6"),
    )


def test_the_stable_prompt_is_encoded_once_and_every_body_is_build_bodys(server, fake_time, monkeypatch):
    """Six requests with a rebuilt prompt: the stable text encoded once (six times before); then an edit."""
    hits = _counting(monkeypatch, "ünïcode kept")
    server.set_scenario(Scenario.of(*["ok"] * 7))
    adapter = build(WIRE, server, fake_time)
    history = (Message.user_text("go"),)
    for i in range(6):
        req = ModelRequest(model=MODEL, system=_system(STABLE, i), messages=history, tools=(WEATHER,))
        assert adapter.complete(req).text == "ok"
        assert server.requests[-1].body == adapter.build_body(req)
        assert server.requests[-1].body["system"][2]["text"] == f"round {i} of 6"
    assert len(hits) == 1
    edited = STABLE.replace("GEODE", "GEODE (edited)")
    req = ModelRequest(model=MODEL, system=_system(edited, 6), messages=history, tools=(WEATHER,))
    adapter.complete(req)
    assert server.requests[-1].body["system"][0]["text"] == edited
    assert server.requests[-1].body["system"][1]["cache_control"] == {"type": "ephemeral"}
    assert server.requests[-1].body == adapter.build_body(req)
