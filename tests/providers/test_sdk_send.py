"""The Anthropic adapter builds the SDK's request once per client (issue 34, session 4): each model request
then only builds the ``httpx`` request with its body and sends it through the SDK's own client; what the
server receives (headers, body) is what ``client.post`` sends, and a new key rebuilds it."""

from __future__ import annotations

from typing import Any

import anthropic

from geode.conversation import Message
from geode.providers.adapter_base import JSON_HEADERS, post_json
from geode.providers.types import ModelRequest
from geode.testing.scenario import Scenario
from tests.providers.conftest import WEATHER, build

WIRE = "anthropic-messages"
MODEL = "claude-opus-5-5"


def _counting_builds(monkeypatch: Any) -> list[int]:
    built: list[int] = []
    real = anthropic.Anthropic._build_request

    def counting(self: Any, options: Any, **kw: Any) -> Any:
        built.append(1)
        return real(self, options, **kw)

    monkeypatch.setattr(anthropic.Anthropic, "_build_request", counting)
    return built


def test_the_sdk_request_is_built_once_per_client_and_sends_what_post_sends(server, fake_time, monkeypatch):
    """Six requests (streamed and not) build the SDK's request once (six times before); the headers equal
    ``client.post``'s, the body is ``build_body``'s; ``set_api_key`` builds it again with the new key."""
    built = _counting_builds(monkeypatch)
    server.set_scenario(Scenario.of(*["ok"] * 9))
    adapter = build(WIRE, server, fake_time, default_headers={"x-team": "blue"})
    history = (Message.user_text("weather in Oslo?"),)
    for i in range(6):
        req = ModelRequest(model=MODEL, messages=history, tools=(WEATHER,), stream=i % 2 == 0)
        response = adapter.complete(req)
        assert response.text == "ok"
        assert server.requests[-1].body == adapter.build_body(req)
    assert len(built) == 1
    sent = server.requests[-1].headers
    post_json(adapter.client, "/v1/messages", {"model": MODEL, "max_tokens": 8, "messages": []})
    by_post = server.requests[-1].headers
    assert {k: v for k, v in sent.items() if k != "content-length"} == {
        k: v for k, v in by_post.items() if k != "content-length"
    }
    assert (
        sent["x-team"] == "blue"
        and sent["anthropic-version"]
        and sent["content-type"] == JSON_HEADERS["Content-Type"]
    )
    old_key = sent["authorization"]
    adapter.set_api_key("sk-rotated-secret")
    adapter.complete(ModelRequest(model=MODEL, messages=history))
    assert len(built) == 3  # the post above, then the new client's one build
    assert server.requests[-1].headers["authorization"] != old_key


def test_a_client_with_middleware_keeps_the_sdk_request_path(server, fake_time, monkeypatch):
    """Middleware may change any request: such a client is sent through ``client.post``, every time."""
    seen: list[str] = []

    def middleware(request: Any, call_next: Any) -> Any:
        seen.append(request.options.url)
        return call_next(request)

    server.set_scenario(Scenario.of("one", "two"))
    adapter = build(WIRE, server, fake_time)
    client = anthropic.Anthropic(api_key="sk-test-secret", base_url=server.base_url, middleware=[middleware])
    monkeypatch.setattr(type(adapter), "_make_client", lambda self: client)
    req = ModelRequest(model=MODEL, messages=(Message.user_text("hi"),))
    assert adapter.complete(req).text == "one"
    assert adapter.complete(req.model_copy(update={"stream": False})).text == "two"
    assert seen == ["/v1/messages", "/v1/messages"]


def test_the_client_cookie_jar_is_sent_as_it_is_at_each_request(server, fake_time):
    """A cookie the API set (a load balancer's) goes out as the SDK's client holds it now, not as it was
    when the request was first built."""
    server.set_scenario(Scenario.of("one", "two"))
    adapter = build(WIRE, server, fake_time)
    req = ModelRequest(model=MODEL, messages=(Message.user_text("hi"),))
    adapter.client._client.cookies.set("lb", "first")
    adapter.complete(req)
    first = server.requests[-1].headers["cookie"]
    adapter.client._client.cookies.set("lb", "second")
    adapter.complete(req)
    assert server.requests[-1].headers["cookie"] != first


def _raw_sender(base: str) -> tuple[Any, Any]:
    from geode.providers import sdk_tls
    from geode.providers.sdk_send import Senders

    http = sdk_tls.http_client(anthropic, base, anthropic.Timeout(10.0))
    client = anthropic.Anthropic(api_key="sk-test-secret", base_url=base, http_client=http, max_retries=0)
    sender = Senders("/v1/messages", JSON_HEADERS).get(client)
    assert sender is not None
    return client, sender


def test_a_direct_send_finishes_the_response_as_the_client_does() -> None:
    """Sent to geode's transport without Client.send's layers: a redirect is still followed (the body sent
    again on a 307), a cookie the server set is kept and sent, the response knows its request and its
    elapsed time, and a client with an event hook goes through Client.send (the hook runs)."""
    from tests.providers.raw_http_kit import RawServer, answer

    body = b'{"id": "msg_1", "type": "message"}'
    replies = [
        answer(b"", status=b"307 Temporary Redirect", headers=b"Location: /v1/messages?moved=1\r\n"),
        answer(body, headers=b"Content-Type: application/json\r\nSet-Cookie: lb=blue; Path=/\r\n"),
        answer(body, headers=b"Content-Type: application/json\r\n"),
        answer(body, headers=b"Content-Type: application/json\r\n"),
    ]

    def script(conn: Any, n: int) -> None:
        while replies and server.read_request(conn) is not None:
            conn.sendall(replies.pop(0))

    with RawServer(script) as server:
        client, sender = _raw_sender(server.base)
        response = sender.send(b'{"x": 1}', stream=False)
        assert response.json()["id"] == "msg_1" and len(response.history) == 1
        assert response.request.url.path == "/v1/messages" and response.elapsed.total_seconds() >= 0
        assert [r.split(b"\r\n", 1)[0] for r in server.requests] == [
            b"POST /v1/messages HTTP/1.1",
            b"POST /v1/messages?moved=1 HTTP/1.1",
        ]
        assert all(r.endswith(b'\r\n\r\n{"x": 1}') for r in server.requests)
        sender.send(b"{}", stream=False)
        assert b"\r\ncookie: lb=blue\r\n" in server.requests[-1].lower()
        hooked: list[Any] = []
        client._client.event_hooks = {"request": [hooked.append], "response": []}
        sender.send(b"{}", stream=False)
        assert len(hooked) == 1 and len(server.requests) == 4
        client.close()


def test_an_httpx_without_the_internals_a_direct_send_uses_sends_by_client_send(monkeypatch: Any) -> None:
    """A later ``httpx2`` that renamed one of the client internals the direct send finishes a response with:
    every request goes through ``Client.send`` (answered as before), none fails on the missing name."""
    import httpx2

    from geode.providers import sdk_send
    from tests.providers.raw_http_kit import RawServer, answer

    body = b'{"id": "msg_2", "type": "message"}'

    def script(conn: Any, n: int) -> None:
        while server.read_request(conn) is not None:
            conn.sendall(answer(body, headers=b"Content-Type: application/json\r\n"))

    monkeypatch.setattr(sdk_send, "_HTTPX_INTERNALS", (*sdk_send._HTTPX_INTERNALS, "_a_name_renamed_since"))
    sent: list[Any] = []
    real_send = httpx2.Client.send
    monkeypatch.setattr(
        httpx2.Client, "send", lambda self, *a, **k: sent.append(1) or real_send(self, *a, **k)
    )
    with RawServer(script) as server:
        client, sender = _raw_sender(server.base)
        assert not sdk_send._httpx_internals_present(client._client)
        assert sender.send(b"{}", stream=False).json()["id"] == "msg_2" and sent == [1]
        client.close()
