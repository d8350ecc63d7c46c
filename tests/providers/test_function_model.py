"""The in-process FunctionModel fake used by the loop's unit tests."""

from __future__ import annotations

import pytest

from geode.providers.types import ModelResponse, ProviderError, ProviderErrorKind, StopReason
from geode.testing.function_model import FunctionModel
from tests.providers.conftest import request


def test_function_of_the_request():
    fm = FunctionModel(lambda req: f"you said {req.messages[-1].text}")
    deltas: list[str] = []
    resp = fm.complete(request("openai-chat", text="hi there"), deltas.append)
    assert resp.text == "you said hi there" and "".join(deltas) == resp.text
    assert len(fm.requests) == 1


def test_script_with_tool_calls_and_errors():
    fm = FunctionModel.script(
        [
            {"tool_calls": [{"name": "get_weather", "input": {"city": "Oslo"}}]},
            ProviderError(ProviderErrorKind.RATE_LIMIT, "slow"),
            ModelResponse(text="done"),
        ]
    )
    first = fm.complete(request("openai-chat"))
    assert first.stop_reason is StopReason.TOOL_USE and first.tool_calls[0].input == {"city": "Oslo"}
    with pytest.raises(ProviderError):
        fm.complete(request("openai-chat"))
    assert fm.complete(request("openai-chat")).text == "done"
    with pytest.raises(ProviderError, match="exhausted"):
        fm.complete(request("openai-chat"))
