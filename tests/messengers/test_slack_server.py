"""The local Slack server against the real slack_sdk: Web API envelopes and token checks, 429 with
Retry-After, and Socket Mode delivery, ack tracking, redelivery, button presses and disconnects."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import urllib.request
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from slack_sdk.errors import SlackApiError
from slack_sdk.socket_mode.aiohttp import SocketModeClient
from slack_sdk.socket_mode.request import SocketModeRequest
from slack_sdk.socket_mode.response import SocketModeResponse
from slack_sdk.web.async_client import AsyncWebClient

from geode.testing.slack_server import LocalSlack

ROOT = Path(__file__).resolve().parents[2]
CHANNEL = "C0GENERAL1"


async def until(predicate: Callable[[], object], timeout_s: float = 10.0, *, what: str = "condition") -> None:
    """poll_for for async tests: the SDK's tasks run on this loop, so the wait must yield to them."""
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not predicate():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out after {timeout_s:g}s waiting for {what}")
        await asyncio.sleep(0.02)


@pytest.fixture
def slack() -> Iterator[LocalSlack]:
    with LocalSlack(redeliver_after_s=0.3, max_retries=2) as server:
        yield server


def _web(slack: LocalSlack, token: str | None = None) -> AsyncWebClient:
    return AsyncWebClient(token=token or slack.bot_token, base_url=slack.api_url, retry_handlers=[])


class Socket:
    """A stock slack_sdk SocketModeClient whose requests land in a queue (acked only when told)."""

    def __init__(self, slack: LocalSlack) -> None:
        self.client = SocketModeClient(slack.app_token, web_client=_web(slack, "unused"))
        self.requests: asyncio.Queue[SocketModeRequest] = asyncio.Queue()
        self.frames: list[dict[str, Any]] = []

        async def on_request(_client: Any, request: SocketModeRequest) -> None:
            await self.requests.put(request)

        async def on_message(_client: Any, message: dict[str, Any], _raw: str | None) -> None:
            self.frames.append(message)

        self.client.socket_mode_request_listeners.append(on_request)
        self.client.message_listeners.append(on_message)

    async def next(self, timeout_s: float = 5.0) -> SocketModeRequest:
        return await asyncio.wait_for(self.requests.get(), timeout_s)

    async def ack(self, request: SocketModeRequest) -> None:
        await self.client.send_socket_mode_response(SocketModeResponse(envelope_id=request.envelope_id))


@pytest.fixture
async def socket(slack: LocalSlack) -> AsyncIterator[Socket]:
    sock = Socket(slack)
    try:
        await sock.client.connect()
        yield sock
    finally:
        await sock.client.close()


async def test_tokens_are_checked_per_method(slack: LocalSlack) -> None:
    auth = await _web(slack).auth_test()
    assert (auth["ok"], auth["user_id"], auth["user"]) == (True, slack.bot_user, slack.bot_name)
    for client, call, error in [
        (_web(slack, "xoxb-wrong"), "auth_test", "invalid_auth"),
        (_web(slack, slack.app_token), "auth_test", "not_allowed_token_type"),
    ]:
        with pytest.raises(SlackApiError) as caught:
            await getattr(client, call)()
        assert caught.value.response["error"] == error
    opener = _web(slack, "unused")
    with pytest.raises(SlackApiError) as caught:
        await opener.apps_connections_open(app_token=slack.bot_token)
    assert caught.value.response["error"] == "not_allowed_token_type"
    url = (await opener.apps_connections_open(app_token=slack.app_token))["url"]
    assert url.startswith(f"ws://127.0.0.1:{slack.port}/slack-ws?ticket=")


async def test_post_in_a_thread_with_blocks_then_update(slack: LocalSlack) -> None:
    web = _web(slack)
    root = slack.push_message(CHANNEL, "question")
    button = {"type": "button", "text": {"type": "plain_text", "text": "Yes"}, "action_id": "a", "value": "v"}
    section = {"type": "section", "text": {"type": "mrkdwn", "text": "ok?"}}
    blocks: list[dict[str, Any]] = [section, {"type": "actions", "elements": [button]}]
    sent = await web.chat_postMessage(channel=CHANNEL, text="ok?", thread_ts=root["ts"], blocks=blocks)
    assert sent["channel"] == CHANNEL and sent["message"]["thread_ts"] == root["ts"]
    [post] = slack.posts(CHANNEL)
    assert (post["ts"], post["thread_ts"], post["text"]) == (sent["ts"], root["ts"], "ok?")
    assert post["blocks"][1]["elements"][0]["value"] == "v"
    assert slack.calls("chat.postMessage")[0]["params"]["blocks"] == blocks  # a JSON body, as slack_sdk sends
    await web.chat_update(channel=CHANNEL, ts=sent["ts"], text="Approved", blocks=[])
    [post] = slack.posts()
    assert (post["text"], post["blocks"], post["edited"]) == ("Approved", [], True)
    await web.reactions_add(channel=CHANNEL, timestamp=root["ts"], name="eyes")
    for call, error in [
        (lambda: web.chat_update(channel=CHANNEL, ts=root["ts"], text="not mine"), "cant_update_message"),
        (lambda: web.reactions_add(channel=CHANNEL, timestamp=root["ts"], name="eyes"), "already_reacted"),
        (lambda: web.api_call("chat.scheduleMessage", json={"channel": CHANNEL}), "unknown_method"),
    ]:
        with pytest.raises(SlackApiError) as caught:
            await call()
        assert caught.value.response["error"] == error


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"channel": "#general", "text": "x"}, "channel_not_found"),
        ({"channel": CHANNEL, "text": "x" * 40_001}, "msg_too_long"),
        (
            {"channel": CHANNEL, "text": "x", "blocks": [{"type": "actions", "elements": [
                {"type": "button", "text": {"type": "plain_text", "text": "b"}, "action_id": "a",
                 "value": "v" * 2001}]}]},
            "invalid_blocks",
        ),
    ],
)  # fmt: skip
async def test_bad_posts_are_refused(slack: LocalSlack, kwargs: dict[str, Any], error: str) -> None:
    with pytest.raises(SlackApiError) as caught:
        await _web(slack).chat_postMessage(**kwargs)
    assert caught.value.response["error"] == error and slack.posts() == []


async def test_fail_next_answers_429_with_retry_after(slack: LocalSlack) -> None:
    slack.fail_next("chat.postMessage", retry_after=7)
    with pytest.raises(SlackApiError) as caught:
        await _web(slack).chat_postMessage(channel=CHANNEL, text="x")
    response = caught.value.response
    assert (response.status_code, response["error"]) == (429, "ratelimited")
    assert response.headers["Retry-After"] == "7"
    await _web(slack).chat_postMessage(channel=CHANNEL, text="x")  # only the next call failed
    assert [c["status"] for c in slack.calls("chat.postMessage")] == [429, 200]
    assert len(slack.posts()) == 1


async def test_socket_mode_hello_then_events_and_acks(slack: LocalSlack, socket: Socket) -> None:
    await until(lambda: socket.frames, what="hello")
    assert socket.frames[0]["type"] == "hello"
    pushed = slack.push_message(CHANNEL, "hi bot", mention=True, thread_ts="1700000000.000100")
    first, second = await socket.next(), await socket.next()
    assert [first.type, second.type] == ["events_api", "events_api"]
    event = first.payload["event"]
    assert first.payload["type"] == "event_callback" and first.payload["event_id"] == pushed["event_id"]
    assert (event["type"], event["channel"], event["user"]) == ("message", CHANNEL, "U0ALICE01")
    assert (event["text"], event["ts"], event["thread_ts"]) == (
        f"<@{slack.bot_user}> hi bot",
        pushed["ts"],
        "1700000000.000100",
    )
    assert second.payload["event"]["type"] == "app_mention"
    assert second.payload["event_id"] == pushed["event_ids"][1]
    assert slack.acks() == []
    await socket.ack(first)
    await socket.ack(second)
    await until(lambda: len(slack.acks()) == 2, what="acks")
    assert slack.acks() == [first.envelope_id, second.envelope_id]


async def test_an_unacked_envelope_is_redelivered_until_acked(slack: LocalSlack, socket: Socket) -> None:
    pushed = slack.push_message(CHANNEL, "hello")
    first = await socket.next()
    again = await socket.next()  # not acked within 0.3 s
    assert again.envelope_id != first.envelope_id
    assert (first.retry_attempt, again.retry_attempt, again.retry_reason) == (0, 1, "timeout")
    assert again.payload["event_id"] == first.payload["event_id"] == pushed["event_id"]
    await socket.ack(again)  # acking any envelope of the event settles it
    await until(lambda: slack.acks() == [again.envelope_id], what="the ack")
    sent_by_the_ack = len(slack.envelopes())  # 2, unless a slow machine let a third go out first
    with pytest.raises(TimeoutError):
        while True:  # what went out before the ack, then nothing
            await socket.next(timeout_s=1.0)
    assert len(slack.envelopes()) == sent_by_the_ack
    assert [e["retry_attempt"] for e in slack.envelopes()][:2] == [0, 1]


async def test_redelivery_stops_after_max_retries_and_push_envelope_is_verbatim(
    slack: LocalSlack, socket: Socket
) -> None:
    slack.push_message(CHANNEL, "never acked")
    attempts = [(await socket.next()).retry_attempt for _ in range(3)]
    assert attempts == [0, 1, 2]
    with pytest.raises(TimeoutError):
        await socket.next(timeout_s=1.0)
    original = slack.envelopes()[0]
    slack.push_envelope({**original, "retry_attempt": 5})
    resent = await socket.next()
    assert (resent.envelope_id, resent.retry_attempt) == (original["envelope_id"], 5)


async def test_button_press_arrives_as_block_actions(slack: LocalSlack, socket: Socket) -> None:
    label = {"type": "plain_text", "text": "Yes"}
    button = {"type": "button", "text": label, "action_id": "yes", "value": "ap:1"}
    sent = await _web(slack).chat_postMessage(
        channel=CHANNEL, text="run it?", thread_ts="1700000000.000200",
        blocks=[{"type": "actions", "elements": [button]}],
    )  # fmt: skip
    slack.push_action(CHANNEL, sent["ts"], "yes", "ap:1", user="U0BOB0001")
    press = await socket.next()
    payload = press.payload
    assert press.type == "interactive" and payload["type"] == "block_actions"
    assert (payload["actions"][0]["action_id"], payload["actions"][0]["value"]) == ("yes", "ap:1")
    assert (payload["user"]["id"], payload["channel"]["id"]) == ("U0BOB0001", CHANNEL)
    assert payload["message"]["ts"] == sent["ts"] and payload["container"]["thread_ts"] == "1700000000.000200"


async def test_disconnect_makes_the_sdk_reconnect(slack: LocalSlack, socket: Socket) -> None:
    await until(lambda: slack.connections() == 1, what="connected")
    slack.disconnect()

    def hellos() -> int:  # slack_sdk handles "disconnect" itself: listeners never see it
        return sum(1 for f in socket.frames if f.get("type") == "hello")

    await until(lambda: hellos() == 2, what="a second hello")
    await until(lambda: slack.connections() == 1, what="the old link closed")
    assert len(slack.calls("apps.connections.open")) == 2
    slack.push_message(CHANNEL, "after the reconnect")
    request = await socket.next()
    assert request.payload["event"]["text"] == "after the reconnect"


def test_the_server_runs_by_hand_with_an_http_test_api() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "geode.testing.slack_server", "--port", "0"],
        cwd=ROOT, stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        api_url = first.split("Web API at ")[1].strip()
        base = api_url.removesuffix("/api/")
        info = _http(f"{base}/_local/info")
        assert info["api_url"] == api_url
        pushed = _http(f"{base}/_local/push_message", {"channel": CHANNEL, "text": "by hand"})
        assert pushed["text"] == "by hand" and pushed["event_id"]
        request = urllib.request.Request(
            f"{api_url}chat.postMessage",
            data=json.dumps({"channel": CHANNEL, "text": "reply"}).encode(),
            headers={"Authorization": f"Bearer {info['bot_token']}", "Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=5) as resp:
            assert json.loads(resp.read())["ok"] is True
        assert [p["text"] for p in _http(f"{base}/_local/posts")] == ["reply"]
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=15)
    assert proc.returncode == 0


def _http(url: str, body: dict[str, Any] | None = None) -> Any:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=5) as resp:
        reply = json.loads(resp.read())
    assert reply["ok"] is True, reply
    return reply["result"]
