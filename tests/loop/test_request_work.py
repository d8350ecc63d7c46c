"""The loop's model request per round is built, not validated again (issue 34, session 4): its parts are the
loop's own (the history's messages, the plan's schemas, the prompt's sections), so every request of a turn
carries the plan's very tuple of tool schemas and no round copies the history and the tools to check them."""

from __future__ import annotations

from typing import Any

from geode.loop.prepare import plan_tools
from geode.providers.types import ModelRequest
from tests.loop.conftest import Rig, tool

K = 5


def test_a_turns_requests_are_not_validated_again_and_share_the_plans_schemas(
    fake_rig: Rig, monkeypatch: Any
) -> None:
    """Before: each of the K + 1 requests validated every message and schema again (a new tuple of each)."""
    validated: list[int] = []
    real = ModelRequest.__init__

    def counting(self: ModelRequest, **data: Any) -> None:
        validated.append(1)
        real(self, **data)

    monkeypatch.setattr(ModelRequest, "__init__", counting)
    model = fake_rig.script(*[{"tool_calls": [tool("read", f"r{i}", key=f"k{i}")]} for i in range(K)], "done")
    result = fake_rig.loop(model).run_turn("s-request", "turn-1", "read five")
    assert result.text == "done"
    assert len(model.requests) == K + 1
    assert validated == []
    schemas, _ = plan_tools(fake_rig.plan)
    assert all(r.tools is schemas for r in model.requests)
    assert [len(r.messages) for r in model.requests] == [1 + 2 * i for i in range(K + 1)]
    assert all(r.metadata["session_id"] == "s-request" for r in model.requests)
