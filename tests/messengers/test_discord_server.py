"""The local Discord server speaks the wire formats discord.py relies on: Bot-token REST with exact JSON
content types and Discord's 429 shape, and a gateway with HELLO, heartbeat ACKs, IDENTIFY → READY +
GUILD_CREATE, dispatches in sequence, and RESUME replaying only what the client had not seen."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import warnings
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from geode.testing.discord_gateway import MESSAGE_CONTENT_INTENT
from geode.testing.discord_server import BOT_ID, CHANNELS, GUILD_ID, THREADS, USER_ID, LocalDiscord
from tests.waiting import poll_for

with warnings.catch_warnings():  # discord.py imports audioop (deprecated); see geode/messengers/discord.py
    warnings.filterwarnings("ignore", "'audioop' is deprecated", DeprecationWarning)
    import discord

from geode.messengers.discord import point_at

CHANNEL = CHANNELS[0]
THREAD = next(iter(THREADS))
ROOT = Path(__file__).resolve().parents[2]
JSONd = dict[str, Any]


@pytest.fixture
def dc() -> Iterator[LocalDiscord]:
    with LocalDiscord() as server:
        yield server


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


def _auth(dc: LocalDiscord) -> dict[str, str]:
    return {"Authorization": f"Bot {dc.token}"}


async def test_rest_needs_the_bot_token_and_answers_exact_json(
    dc: LocalDiscord, http: aiohttp.ClientSession
) -> None:
    for headers in ({}, {"Authorization": "Bot wrong"}, {"Authorization": dc.token}):
        async with http.get(f"{dc.api_base}/users/@me", headers=headers) as resp:
            assert resp.status == 401 and (await resp.json())["message"] == "401: Unauthorized"
    async with http.get(f"{dc.api_base}/users/@me", headers=_auth(dc)) as resp:
        assert resp.status == 200
        assert resp.headers["Content-Type"] == "application/json"  # discord.py parses nothing else
        assert (await resp.json())["id"] == str(BOT_ID)
    async with http.get(f"{dc.api_base}/gateway/bot", headers=_auth(dc)) as resp:
        assert (await resp.json())["url"] == dc.gateway_url
    async with http.get(f"{dc.api_base}/oauth2/applications/@me", headers=_auth(dc)) as resp:
        app = await resp.json()
        assert {"id", "name", "description", "icon", "bot_public", "bot_require_code_grant", "owner",
                "verify_key"} <= set(app)  # fmt: skip
    async with http.get(f"{dc.api_base}/nothing/here", headers=_auth(dc)) as resp:
        assert resp.status == 404 and resp.headers["Content-Type"] == "application/json"


async def test_a_429_has_discords_shape(dc: LocalDiscord, http: aiohttp.ClientSession) -> None:
    dc.fail_next("send_message", retry_after=2.5, count=2)
    url = f"{dc.api_base}/channels/{CHANNEL}/messages"
    for _ in range(2):
        async with http.post(url, json={"content": "hi"}, headers=_auth(dc)) as resp:
            body = await resp.json()
            assert resp.status == 429 and body["retry_after"] == 2.5 and body["global"] is False
            assert resp.headers["Retry-After"] == "3"
            assert resp.headers["Via"]  # without it discord.py takes the 429 for a Cloudflare ban
    async with http.post(url, json={"content": "hi"}, headers=_auth(dc)) as resp:
        assert resp.status == 200
    assert [c["status"] for c in dc.calls("send_message")] == [429, 429, 200]
    assert [p["content"] for p in dc.posts()] == ["hi"]
    with pytest.raises(ValueError):
        dc.fail_next("no_such_route")


async def test_posts_are_checked_like_discord_checks_them(
    dc: LocalDiscord, http: aiohttp.ClientSession
) -> None:
    url = f"{dc.api_base}/channels/{CHANNEL}/messages"

    async def post(body: JSONd, where: str = url) -> tuple[int, JSONd]:
        async with http.post(where, json=body, headers=_auth(dc)) as resp:
            return resp.status, await resp.json()

    assert (await post({"content": "x" * 2001}))[0] == 400
    assert (await post({"content": ""}))[1]["code"] == 50006
    assert (await post({"content": "hi"}, f"{dc.api_base}/channels/42/messages"))[1]["code"] == 10003
    bad_ref = {"content": "hi", "message_reference": {"message_id": 123}}
    assert (await post(bad_ref))[0] == 400
    long_id = [{"type": 1, "components": [{"type": 2, "style": 1, "label": "a", "custom_id": "x" * 101}]}]
    assert (await post({"content": "hi", "components": long_id}))[0] == 400
    asked = dc.push_message(CHANNEL, "question")
    status, reply = await post({"content": "answer", "message_reference": {"message_id": int(asked["id"])}})
    assert status == 200 and reply["message_reference"]["message_id"] == asked["id"]
    assert reply["referenced_message"]["content"] == "question"
    assert [p["reply_to"] for p in dc.posts()] == [asked["id"]]


class _Gateway:
    """A raw gateway client: frames in arrival order, without heartbeats' ACKs unless asked for."""

    def __init__(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        self.ws = ws

    async def recv(self) -> JSONd:
        msg = await asyncio.wait_for(self.ws.receive(), 5)
        assert msg.type is aiohttp.WSMsgType.TEXT, msg
        frame: JSONd = json.loads(msg.data)
        return frame

    async def send(self, op: int, d: Any) -> None:
        await self.ws.send_str(json.dumps({"op": op, "d": d}))


async def _connect(http: aiohttp.ClientSession, url: str) -> _Gateway:
    ws = await http.ws_connect(url + "?v=10&encoding=json&compress=zlib-stream")
    return _Gateway(ws)


async def test_the_gateway_identifies_dispatches_in_sequence_and_resumes_only_unseen_events(
    dc: LocalDiscord, http: aiohttp.ClientSession
) -> None:
    dc.push_message(CHANNEL, "before anyone connected")  # no session: in the history only, never dispatched
    gw = await _connect(http, dc.gateway_url)
    hello = await gw.recv()
    assert hello["op"] == 10 and hello["d"]["heartbeat_interval"] > 0
    await gw.send(1, None)
    assert (await gw.recv())["op"] == 11
    await gw.send(2, {"token": dc.token, "intents": MESSAGE_CONTENT_INTENT, "properties": {}})
    ready, guild = await gw.recv(), await gw.recv()
    assert (ready["t"], ready["s"], guild["t"], guild["s"]) == ("READY", 1, "GUILD_CREATE", 2)
    assert ready["d"]["resume_gateway_url"] == dc.gateway_url and ready["d"]["user"]["id"] == str(BOT_ID)
    session_id = ready["d"]["session_id"]
    assert guild["d"]["id"] == str(GUILD_ID)
    assert [c["id"] for c in guild["d"]["channels"]] == [str(c) for c in CHANNELS]
    assert [(t["id"], t["parent_id"]) for t in guild["d"]["threads"]] == [(str(THREAD), str(CHANNEL))]
    seen = dc.push_message(CHANNEL, "seen", thread_id=THREAD)
    frame = await gw.recv()
    assert (frame["s"], frame["d"]["id"], frame["d"]["channel_id"]) == (3, seen["id"], str(THREAD))
    unseen = dc.push_message(CHANNEL, "on the wire, lost with the connection")  # s=4
    dropping = asyncio.create_task(asyncio.to_thread(dc.drop_gateway, 4000))
    lost = await gw.recv()
    assert (lost["s"], lost["d"]["id"]) == (4, unseen["id"])
    closed = await asyncio.wait_for(gw.ws.receive(), 5)
    assert closed.type is aiohttp.WSMsgType.CLOSE and closed.data == 4000
    await gw.ws.close()
    await dropping
    away = dc.push_message(CHANNEL, "while away")  # s=5, buffered in the session
    gw = await _connect(http, ready["d"]["resume_gateway_url"])
    assert (await gw.recv())["op"] == 10
    await gw.send(6, {"token": dc.token, "session_id": session_id, "seq": 3})
    replayed = [await gw.recv() for _ in range(3)]
    assert [(f["t"], f["s"]) for f in replayed] == [
        ("MESSAGE_CREATE", 4),
        ("MESSAGE_CREATE", 5),
        ("RESUMED", 6),
    ]
    assert [f["d"]["id"] for f in replayed[:2]] == [unseen["id"], away["id"]]
    assert (dc.identify_count(), dc.resume_count()) == (1, 1)
    await gw.ws.close()
    gw = await _connect(http, dc.gateway_url)
    await gw.recv()
    await gw.send(6, {"token": dc.token, "session_id": "not-a-session", "seq": 1})
    assert (await gw.recv())["op"] == 9  # INVALID_SESSION: the client identifies anew
    await gw.ws.close()


async def _identify(http: aiohttp.ClientSession, dc: LocalDiscord) -> _Gateway:
    """A new session (READY and GUILD_CREATE read)."""
    gw = await _connect(http, dc.gateway_url)
    assert (await gw.recv())["op"] == 10
    await gw.send(2, {"token": dc.token, "intents": MESSAGE_CONTENT_INTENT, "properties": {}})
    assert [(await gw.recv())["t"] for _ in range(2)] == ["READY", "GUILD_CREATE"]
    return gw


async def test_a_message_posted_while_no_session_is_connected_is_only_in_the_history(
    dc: LocalDiscord, http: aiohttp.ClientSession
) -> None:
    """Like Discord: a new session (IDENTIFY) gets nothing dispatched while no session was connected, and
    the channel's REST history pages it (``after``/``before``/``limit``, newest first)."""
    before_any = dc.push_message(CHANNEL, "before any session")
    gw = await _identify(http, dc)
    first = dc.push_message(CHANNEL, "to the first session")
    assert (await gw.recv())["d"]["id"] == first["id"]
    await gw.ws.close()
    await asyncio.to_thread(poll_for, lambda: not dc.connected(), 5, what="the session disconnected")
    away = [dc.push_message(CHANNEL, f"while away {i}") for i in range(3)]
    in_thread = dc.push_message(CHANNEL, "away in the thread", thread_id=THREAD)
    gw = await _identify(http, dc)
    live = dc.push_message(CHANNEL, "to the second session")
    frame = await gw.recv()
    assert (frame["t"], frame["d"]["id"]) == ("MESSAGE_CREATE", live["id"])  # the first thing it gets
    await gw.ws.close()
    assert dc.undelivered == 1 and dc.identify_count() == 2

    async def history(channel: int, **query: Any) -> tuple[int, Any]:
        url = f"{dc.api_base}/channels/{channel}/messages"
        async with http.get(url, params={k: str(v) for k, v in query.items()}, headers=_auth(dc)) as resp:
            return resp.status, await resp.json()

    ids = [m["id"] for m in away]
    status, page = await history(CHANNEL, after=first["id"])
    assert status == 200 and [m["id"] for m in page] == [live["id"], *reversed(ids)]  # newest first
    assert [m["id"] for m in (await history(CHANNEL, after=first["id"], limit=2))[1]] == ids[1::-1]
    assert [m["id"] for m in (await history(CHANNEL, before=first["id"]))[1]] == [before_any["id"]]
    assert [m["id"] for m in (await history(THREAD, after=first["id"]))[1]] == [in_thread["id"]]
    assert page[-1]["content"] == "while away 0" and page[-1]["author"]["id"] == str(USER_ID)
    for bad in ({"limit": 0}, {"limit": 101}, {"after": "x"}):
        assert (await history(CHANNEL, **bad))[0] == 400
    async with http.get(f"{dc.api_base}/channels/{THREAD}", headers=_auth(dc)) as resp:
        assert (await resp.json())["parent_id"] == str(CHANNEL)


async def test_without_the_message_content_intent_content_is_empty_unless_mentioned(
    dc: LocalDiscord, http: aiohttp.ClientSession
) -> None:
    gw = await _connect(http, dc.gateway_url)
    await gw.recv()
    await gw.send(2, {"token": dc.token, "intents": 1 << 9, "properties": {}})
    await gw.recv(), await gw.recv()
    dc.push_message(CHANNEL, "secret")
    dc.push_message(CHANNEL, "for you", mention_bot=True)
    plain, mention = await gw.recv(), await gw.recv()
    assert (plain["d"]["content"], mention["d"]["content"]) == ("", f"<@{BOT_ID}> for you")
    await gw.ws.close()


async def test_a_bad_identify_token_closes_with_4004(dc: LocalDiscord, http: aiohttp.ClientSession) -> None:
    gw = await _connect(http, dc.gateway_url)
    await gw.recv()
    await gw.send(2, {"token": "wrong", "intents": 0, "properties": {}})
    closed = await asyncio.wait_for(gw.ws.receive(), 5)
    assert closed.type is aiohttp.WSMsgType.CLOSE and closed.data == 4004
    await gw.ws.close()


async def test_stock_discord_py_logs_in_gets_ready_replies_and_answers_a_button(dc: LocalDiscord) -> None:
    point_at(dc.api_base, dc.gateway_url)
    intents = discord.Intents.default()
    intents.message_content = True
    client = discord.Client(intents=intents, guild_ready_timeout=0.05)
    ready = asyncio.Event()
    inbox: asyncio.Queue[discord.Message | discord.Interaction] = asyncio.Queue()
    client.event(_handler("on_ready", lambda: ready.set()))
    client.event(_handler("on_message", inbox.put_nowait))
    client.event(_handler("on_interaction", inbox.put_nowait))
    try:
        await client.login(dc.token)
        task = asyncio.create_task(client.connect())
        await asyncio.wait_for(ready.wait(), 10)
        (guild,) = client.guilds
        assert client.user is not None and client.user.id == BOT_ID
        assert {c.id for c in guild.text_channels} == set(CHANNELS) and guild.get_thread(THREAD) is not None
        dc.push_message(CHANNEL, "hello bot", author_id=USER_ID)
        msg = await asyncio.wait_for(inbox.get(), 5)
        assert isinstance(msg, discord.Message) and msg.content == "hello bot"
        view = discord.ui.View(timeout=None)
        view.add_item(discord.ui.Button(label="OK", custom_id="ok:1"))
        reply = await msg.reply("hi", view=view)  # message_reference ids go out as JSON integers
        echo = await asyncio.wait_for(inbox.get(), 5)
        assert isinstance(echo, discord.Message) and echo.id == reply.id and echo.author.id == BOT_ID
        dc.push_button(CHANNEL, reply.id, "ok:1", user_id=USER_ID)
        press = await asyncio.wait_for(inbox.get(), 5)
        assert isinstance(press, discord.Interaction) and press.data == {
            "custom_id": "ok:1",
            "component_type": 2,
        }
        await press.response.send_message("done", ephemeral=True)
        with pytest.raises(discord.InteractionResponded):
            await press.response.defer()
        assert dc.interaction_responses()[0]["data"]["content"] == "done"
        assert dc.posts(CHANNEL)[0]["reply_to"] == str(msg.id)
    finally:
        await client.close()
    await task


def _handler(name: str, action: Any) -> Any:
    async def handler(*args: Any) -> None:
        action(*args)

    handler.__name__ = name
    return handler


def test_the_script_serves_and_its_test_api_works_over_http(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(
        [str(ROOT / "scripts" / "discord-server"), "--port", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        assert "REST http://127.0.0.1:" in first, first + (
            proc.stderr.read() if proc.poll() is not None else ""
        )
        base = first.split("REST ")[1].split("/api/")[0]
        asyncio.run(_drive_local_api(base))
    finally:
        proc.send_signal(signal.SIGTERM)
        _out, err = proc.communicate(timeout=15)
    assert proc.returncode == 0, err


async def _drive_local_api(base: str) -> None:
    async with aiohttp.ClientSession() as http:
        async with http.post(
            f"{base}/_local/push_message", json={"channel_id": CHANNEL, "content": "hi"}
        ) as r:
            assert r.status == 200 and (await r.json())["result"]["content"] == "hi"
        async with http.get(f"{base}/_local/info") as r:
            assert (await r.json())["result"]["bot_id"] == str(BOT_ID)
        async with http.get(f"{base}/_local/posts") as r:
            assert (await r.json())["result"] == []
        async with http.post(f"{base}/_local/push_message", json={"channel_id": 1}) as r:
            assert r.status == 400
