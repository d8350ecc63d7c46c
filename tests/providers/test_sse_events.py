"""The Anthropic adapter reads a stream's events in one generator and builds its ``httpx`` request from the
template without ``build_request`` (issue 34, session 6): the events are the SDK decoder's, however the bytes
are cut into network chunks, and a streamed request builds no ``ServerSentEvent`` and merges no headers."""

from __future__ import annotations

import json
import random
from typing import Any

import anthropic
import httpx2
from anthropic._streaming import ServerSentEvent, SSEDecoder

from geode.conversation import Message
from geode.providers.sse_events import json_value, sse_events
from geode.providers.types import ModelRequest
from geode.testing.scenario import Scenario
from tests.providers.conftest import WEATHER, build

MODEL = "claude-opus-5-5"

STREAMS = [
    b'event: message_start\ndata: {"type": "message_start"}\n\n'
    b"event: ping\ndata: {}\n\n"
    b'event: content_block_delta\ndata: {"text": "h\xc3\xa9llo"}\n\n',
    b"event: a\r\ndata: one\r\ndata: two\r\n\r\n: a comment\r\nid: 7\r\nretry: 10\r\n\r\n"
    b"event: b\rdata:x\r\r",
    b"data: unnamed\n\nevent:\ndata: empty name\n\nevent: z\nevent:\ndata: renamed empty\n\n"
    b"event: c\ndata:  two spaces\nfield: other\n\n",
    b"event: d\ndata: {}\n\nevent: e\ndata: not ended",  # what follows the last blank line is no event
    b"event: f\r\n\r\nevent: g\ndata: \n\n\n\nevent: h\r\ndata: last\r\n\r",
]


def _sdk(stream: bytes, chunks: list[bytes]) -> list[tuple[str, str]]:
    events: list[ServerSentEvent] = list(SSEDecoder().iter_bytes(iter(chunks)))
    return [(e.event, e.data) for e in events if e.event is not None]  # ("event:" alone: None)


def _cut(stream: bytes, rng: random.Random) -> list[bytes]:
    cuts = sorted(rng.sample(range(1, len(stream)), min(len(stream) - 1, rng.randint(0, 12))))
    return [stream[a:b] for a, b in zip([0, *cuts], [*cuts, len(stream)], strict=True)]


def test_the_events_are_the_sdk_decoders_however_the_stream_is_cut():
    """Every stream cut at random places (a "\\r\\n" split between chunks, a UTF-8 character split, a line
    split) gives the events the SDK's decoder gives, in order."""
    rng = random.Random(34)
    for stream in STREAMS:
        whole = _sdk(stream, [stream])
        assert whole, stream
        for _ in range(300):
            chunks = _cut(stream, rng)
            assert list(sse_events(chunks)) == whole == _sdk(stream, chunks), chunks
    one_byte = list(sse_events(bytes([b]) for b in STREAMS[1]))
    assert one_byte == _sdk(STREAMS[1], [STREAMS[1]])


def test_a_streamed_request_builds_no_sdk_event_and_no_merged_request(server, fake_time, monkeypatch):
    """Two streamed tool-call replies: the same response as before, 0 ``ServerSentEvent`` built (about a
    dozen a reply before) and 0 ``build_request`` calls (one a request before); a cookie in the client's
    jar still goes through ``build_request`` (it merges the jar per request)."""
    built: list[int] = []
    real_init, real_build = ServerSentEvent.__init__, httpx2.Client.build_request

    def counting_init(self: Any, *a: Any, **kw: Any) -> None:
        built.append(1)
        real_init(self, *a, **kw)

    merged: list[int] = []

    def counting_build(self: Any, *a: Any, **kw: Any) -> Any:
        merged.append(1)
        return real_build(self, *a, **kw)

    monkeypatch.setattr(ServerSentEvent, "__init__", counting_init)
    monkeypatch.setattr(httpx2.Client, "build_request", counting_build)
    call = {"tool_calls": [{"name": "get_weather", "input": {"city": "Oslo"}}], "text": "Let me look."}
    adapter = build("anthropic-messages", server, fake_time)
    req = ModelRequest(model=MODEL, messages=(Message.user_text("weather?"),), tools=(WEATHER,))
    server.set_scenario(Scenario.of(call, call, call, "done"))
    adapter.complete(req)  # the client and its request template (the one build_request) are built
    built.clear()
    merged.clear()
    for _ in range(2):
        response = adapter.complete(req)
        assert response.text == "Let me look."
        assert [(c.name, c.input) for c in response.tool_calls] == [("get_weather", {"city": "Oslo"})]
    assert built == [] and merged == []
    assert server.requests[-1].body == adapter.build_body(req)
    adapter.client._client.cookies.set("lb", "one")
    assert adapter.complete(req).text == "done"
    assert merged == [1] and "cookie" in server.requests[-1].headers
    assert isinstance(adapter.client, anthropic.Anthropic)


def test_an_events_values_are_not_kept_in_the_parsers_string_cache():
    # pydantic-core's default also caches short values process-wide (16,384 slots): a loop worker filled it
    # with ids it never saw again (~1.3 MiB, the soak's slow growth). Keys are cached, values are not.
    text = '{"type": "message_start", "id": "msg_0123456789abcdef"}'
    a, b = json_value(text), json_value(text)
    assert a == b == json.loads(text)
    assert a["id"] is not b["id"]  # a value: a new string each time (one from the cache on HEAD)
    assert next(iter(a)) is next(iter(b))  # a key: the cached one
