"""Regression guard on WORK, not time (issue 34, HTTP): a streamed Messages request through the anthropic
adapter, the real SDK and its HTTP client, to a local scripted server, runs no ``httpcore``/``h11`` code (the
SDK's client sends it through geode's HTTP/1.1 transport, geode/providers/http11_transport.py) and stays
under a ceiling of Python calls on the calling thread.

Measured when set (00:10 UTC 2026-12-06): 218-220 calls a request (1,235-1,297 through httpcore2 and h11);
00:32 UTC, with DirectPost past Client.send's layers: 195-199; session 8, each stream event's JSON read by
pydantic-core (not json.loads' three Python calls): 185-187. The count moves by a few calls with how the
server's chunks are split into reads: the ceiling has a margin."""

from __future__ import annotations

import sys
import threading
from typing import Any

from geode.conversation import Message
from geode.providers.types import ModelRequest
from geode.testing.scenario import Scenario
from geode.testing.scripted import ScriptedServer
from tests.providers.conftest import FakeTime, build

CEILING = 225


def _calls(adapter: Any, req: ModelRequest) -> tuple[int, set[str]]:
    me = threading.get_ident()
    calls = [0]
    layers: set[str] = set()

    def prof(frame: Any, event: str, arg: Any) -> None:
        if event == "call" and threading.get_ident() == me:
            calls[0] += 1
            name = frame.f_code.co_filename
            if "httpcore" in name or "/h11/" in name:
                layers.add(name)

    sys.setprofile(prof)
    try:
        response = adapter.complete(req)
    finally:
        sys.setprofile(None)
    assert response.text == "Let me look."
    return calls[0], layers


def test_a_streamed_request_runs_no_httpcore_and_few_python_calls() -> None:
    with ScriptedServer() as server:
        server.set_scenario(Scenario.of(*["Let me look."] * 6))
        adapter = build("anthropic-messages", server, FakeTime())
        req = ModelRequest(
            model="claude-opus-5-5", messages=(Message.user_text("x" * 2000),), stream=True, max_tokens=64
        )
        adapter.complete(req)  # the client built, the connection opened
        counts = []
        for _ in range(3):
            calls, layers = _calls(adapter, req)
            assert layers == set()
            counts.append(calls)
        print(f"\nPython calls per streamed request: {counts}")
        assert min(counts) <= CEILING
