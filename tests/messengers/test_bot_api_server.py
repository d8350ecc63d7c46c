"""The local Bot API server speaks the wire format the real python-telegram-bot expects: long polling with
offset confirmation and 409s, the error envelopes, Markdown checks, keyboards and the /_local test API."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from telegram import Bot, InlineKeyboardButton, InlineKeyboardMarkup, Update
from telegram import error as tg
from telegram.ext import ApplicationBuilder, CallbackQueryHandler, CommandHandler

from geode.testing.bot_api_client import LocalBotApiClient
from geode.testing.bot_api_server import LocalBotApi
from geode.testing.bot_api_wire import entities, parse_error
from tests.waiting import poll_for

ROOT = Path(__file__).resolve().parents[2]
CHAT = -100_123


@pytest.fixture
def api() -> Iterator[LocalBotApi]:
    with LocalBotApi() as server:
        yield server


@pytest.fixture
async def bot(api: LocalBotApi) -> AsyncIterator[Bot]:
    async with Bot(api.token, base_url=api.base_url) as b:
        yield b


async def wait_polling(api: LocalBotApi) -> None:
    await asyncio.to_thread(poll_for, lambda: api.polling, 10.0, what="a waiting getUpdates")


async def test_get_me_and_unknown_token(api: LocalBotApi, bot: Bot) -> None:
    me = await bot.get_me()
    assert (me.id, me.username, me.is_bot) == (api.bot_id, "geode_test_bot", True)
    stranger = Bot("42:not-this-bot", base_url=api.base_url)
    with pytest.raises(tg.InvalidToken):
        await stranger.initialize()
    await stranger.shutdown()


async def test_updates_arrive_in_order_and_offset_confirms_them(api: LocalBotApi, bot: Bot) -> None:
    assert await bot.delete_webhook()
    first = api.push_message(CHAT, "/status", sender_id=7, username="bob")
    second = api.push_message(CHAT, "hello @geode_test_bot", sender_id=7)
    press = api.push_callback(CHAT, 1, "approve:x", sender_id=7)
    updates = await bot.get_updates(timeout=0)
    assert [u.update_id for u in updates] == [first["update_id"], second["update_id"], press["update_id"]]
    command = updates[0].message
    assert command is not None and command.from_user is not None and command.from_user.username == "bob"
    assert command.text == "/status" and command.entities[0].type == "bot_command"
    mention = updates[1].message
    assert mention is not None and list(mention.parse_entities(["mention"]).values()) == ["@geode_test_bot"]
    assert updates[2].callback_query is not None and updates[2].callback_query.data == "approve:x"
    # Not confirmed yet: delivered again. Confirmed by offset: gone.
    assert len(await bot.get_updates(timeout=0)) == 3
    assert [u.update_id for u in await bot.get_updates(offset=second["update_id"], timeout=0)] == [
        second["update_id"],
        press["update_id"],
    ]
    assert await bot.get_updates(offset=press["update_id"] + 1, timeout=0) == ()
    assert await bot.get_updates(timeout=0) == ()


async def test_long_poll_waits_then_wakes_on_push(api: LocalBotApi, bot: Bot) -> None:
    started = time.monotonic()
    assert await bot.get_updates(timeout=1) == ()
    assert time.monotonic() - started >= 0.9  # it held the request open
    task = asyncio.create_task(bot.get_updates(timeout=30))
    await wait_polling(api)
    assert api.calls("getUpdates")[-1]["status"] is None  # in flight
    pushed = time.monotonic()
    await asyncio.to_thread(api.push_message, CHAT, "wake up")
    updates = await asyncio.wait_for(task, 10)
    assert [u.message.text for u in updates if u.message] == ["wake up"]
    assert time.monotonic() - pushed < 5
    assert [c["status"] for c in api.calls("getUpdates")] == [200, 200]


async def test_webhook_and_second_poller_conflict(api: LocalBotApi, bot: Bot) -> None:
    assert await bot.set_webhook("https://example.invalid/hook")
    with pytest.raises(tg.Conflict, match="webhook is active"):
        await bot.get_updates(timeout=0)
    assert await bot.delete_webhook()
    async with Bot(api.token, base_url=api.base_url) as other:
        first = asyncio.create_task(bot.get_updates(timeout=30))
        await wait_polling(api)
        second = asyncio.create_task(other.get_updates(timeout=1))
        with pytest.raises(tg.Conflict, match="terminated by other getUpdates request"):
            await asyncio.wait_for(first, 10)
        assert await asyncio.wait_for(second, 10) == ()
    assert api.calls("getUpdates")[-2]["status"] == 409


async def test_fail_next_answers_telegram_error_envelopes(
    api: LocalBotApi, bot: Bot, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PTB_TIMEDELTA", "true")  # else PTB warns when it builds RetryAfter
    api.fail_next("sendMessage", status=429, retry_after=3)
    with pytest.raises(tg.RetryAfter) as caught:
        await bot.send_message(CHAT, "hi")
    assert caught.value._retry_after.total_seconds() == 3
    api.fail_next("sendMessage", status=400, description="Bad Request: chat not found")
    with pytest.raises(tg.BadRequest, match="Chat not found"):
        await bot.send_message(CHAT, "hi")
    assert (await bot.send_message(CHAT, "hi")).text == "hi"
    assert [c["status"] for c in api.calls("sendMessage")] == [429, 400, 200]
    assert [p["text"] for p in api.posts(CHAT)] == ["hi"]


async def test_send_message_checks_like_telegram(api: LocalBotApi, bot: Bot) -> None:
    with pytest.raises(tg.BadRequest, match="parse entities"):
        await bot.send_message(CHAT, "2 * 3 is six", parse_mode="Markdown")
    with pytest.raises(tg.BadRequest, match="reserved"):
        await bot.send_message(CHAT, "Done.", parse_mode="MarkdownV2")
    with pytest.raises(tg.BadRequest, match="too long"):
        await bot.send_message(CHAT, "x" * 4097)
    with pytest.raises(tg.BadRequest, match=r"(?i)button_data_invalid"):
        await bot.send_message(
            CHAT,
            "pick",
            reply_markup=InlineKeyboardMarkup([[InlineKeyboardButton("b", callback_data="d" * 65)]]),
        )
    ok = await bot.send_message(CHAT, "*bold* and `code`", parse_mode="Markdown", message_thread_id=9)
    assert ok.message_thread_id == 9 and ok.is_topic_message
    assert await bot.send_message(CHAT, r"Done\. *yes*", parse_mode="MarkdownV2")
    assert [(p["text"], p["parse_mode"], p["thread_id"]) for p in api.posts(CHAT)] == [
        ("*bold* and `code`", "Markdown", 9),
        (r"Done\. *yes*", "MarkdownV2", None),
    ]


async def test_keyboard_press_answer_and_edit(api: LocalBotApi, bot: Bot) -> None:
    keyboard = InlineKeyboardMarkup([[InlineKeyboardButton("Approve", callback_data="ap:1:y")]])
    sent = await bot.send_message(CHAT, "May I?", reply_markup=keyboard)
    api.push_callback(CHAT, sent.message_id, "ap:1:y", sender_id=5)
    (update,) = await bot.get_updates(timeout=0)
    query = update.callback_query
    assert query is not None and query.message is not None and query.message.message_id == sent.message_id
    assert await bot.answer_callback_query(query.id, text="approved")
    with pytest.raises(tg.BadRequest, match=r"(?i)query is too old"):
        await bot.answer_callback_query(query.id)
    await bot.edit_message_text("May I? Approved.", chat_id=CHAT, message_id=sent.message_id)
    with pytest.raises(tg.BadRequest, match="not modified"):
        await bot.edit_message_text("May I? Approved.", chat_id=CHAT, message_id=sent.message_id)
    (post,) = api.posts(CHAT)
    assert (post["text"], post["reply_markup"], post["edited"]) == ("May I? Approved.", None, True)
    await bot.send_chat_action(CHAT, "typing", message_thread_id=3)
    assert [(a["action"], a["thread_id"]) for a in api.actions(CHAT)] == [("typing", 3)]


async def test_local_http_test_api(api: LocalBotApi, bot: Bot) -> None:
    client = LocalBotApiClient(api.url)
    update = await asyncio.to_thread(client.push_message, CHAT, "over http", sender_id=9)
    assert update["message"]["text"] == "over http" and update["message"]["from"]["id"] == 9
    (got,) = await bot.get_updates(timeout=0)
    assert got.update_id == update["update_id"]
    await bot.send_message(CHAT, "answer")
    posts = await asyncio.to_thread(client.posts, CHAT)
    assert [p["text"] for p in posts] == ["answer"] and await asyncio.to_thread(client.posts, 1) == []
    assert [c["status"] for c in await asyncio.to_thread(client.calls, "sendMessage")] == [200]
    await asyncio.to_thread(client.fail_next, "getMe", status=502)
    with pytest.raises(tg.NetworkError, match="Bad Gateway"):
        await bot.get_me()
    with pytest.raises(RuntimeError, match="Bad Request"):
        await asyncio.to_thread(client.push_message, CHAT, "x", no_such_field=1)
    assert (await asyncio.to_thread(client.info))["base_url"] == api.base_url


async def test_a_stock_ptb_application_runs_unchanged(api: LocalBotApi) -> None:
    app = ApplicationBuilder().token(api.token).base_url(api.base_url).build()
    pressed = asyncio.Event()

    async def on_start(update: Update, _: object) -> None:
        assert update.message is not None
        await update.message.reply_text("started")

    async def on_press(update: Update, _: object) -> None:
        assert update.callback_query is not None
        await update.callback_query.answer()
        await update.callback_query.edit_message_text("pressed")
        pressed.set()

    app.add_handler(CommandHandler("start", on_start))
    app.add_handler(CallbackQueryHandler(on_press))
    async with app:
        await app.start()
        assert app.updater is not None
        await app.updater.start_polling(poll_interval=0.0, timeout=5)
        api.push_message(CHAT, "/start@geode_test_bot", thread_id=4)
        keyboard = InlineKeyboardMarkup([[InlineKeyboardButton("x", callback_data="d")]])
        sent = await app.bot.send_message(CHAT, "pick", reply_markup=keyboard)
        api.push_callback(CHAT, sent.message_id, "d")
        await asyncio.wait_for(pressed.wait(), 10)
        await asyncio.to_thread(poll_for, lambda: len(api.posts(CHAT)) == 2, 10.0, what="the /start reply")
        await app.updater.stop()
        await app.stop()
    assert sorted((p["text"], p["thread_id"]) for p in api.posts(CHAT)) == [("pressed", None), ("started", 4)]
    assert api.calls("deleteWebhook")  # the Updater's first call, as with Telegram


@pytest.mark.parametrize(
    ("mode", "text", "error"),
    [
        ("Markdown", "*a* _b_ `c` [d](http://e.f/g_h)", None),
        ("Markdown", "```\nx * y_z\n```", None),
        ("Markdown", r"2 \* 3", None),
        ("Markdown", "snake_case", "Can't find end of the entity starting at byte offset 5"),
        ("Markdown", "é *open", "Can't find end of the entity starting at byte offset 3"),
        ("Markdown", "[oops", "Can't find end of the entity"),
        ("MarkdownV2", r"*bold* _it_ __u__ ~s~ ||sp|| `a.b` [t](http://x.y) Done\.", None),
        ("MarkdownV2", "> a quote", None),
        ("MarkdownV2", "a-b", "Character '-' is reserved"),
        ("MarkdownV2", "*open", "Can't find end of Bold entity at byte offset 0"),
        ("HTML", "<b>not checked</b>", None),
        ("Bogus", "x", "unsupported parse_mode"),
    ],
)
def test_parse_errors_follow_telegram(mode: str, text: str, error: str | None) -> None:
    got = parse_error(text, mode)
    assert (got is None) if error is None else (got is not None and error in got), got


def test_entity_offsets_count_utf16_units() -> None:
    text = "\U0001f600 /new@geode_test_bot hi @geode_test_bot, not a@b_c_d_e"
    assert entities(text) == [
        {"type": "bot_command", "offset": 3, "length": 19},
        {"type": "mention", "offset": 26, "length": 15},
    ]


def test_runs_by_hand_and_stops_on_sigterm() -> None:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    cmd = [sys.executable, "-m", "geode.testing.bot_api_server", "--port", "0"]
    with subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True) as proc:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        base_url = line.split(" at ", 1)[1].split(" ", 1)[0]
        with urllib.request.urlopen(f"{base_url}123456789:GEODE-local-test-token/getMe", timeout=10) as resp:
            assert json.loads(resp.read())["result"]["username"] == "geode_test_bot"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=15) == 0
        proc.stdout.read()
    assert os.access(ROOT / "scripts" / "telegram-server", os.X_OK)


def test_a_bot_that_dies_mid_request_costs_one_log_line_and_the_server_serves_on(
    api: LocalBotApi, caplog: pytest.LogCaptureFixture
) -> None:
    """A messengers child SIGKILLed while sending its body (a chaos kill): the server logs one line, no
    aiohttp traceback, and answers the next request."""
    import logging
    import socket
    from urllib.parse import urlsplit

    caplog.set_level(logging.INFO)
    url = urlsplit(api.base_url)
    with socket.create_connection((url.hostname, url.port), timeout=10) as s:
        s.sendall(
            f"POST {url.path}{api.token}/sendMessage HTTP/1.1\r\nHost: x\r\n"
            "Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 500\r\n\r\n"
            "chat_id=1&te".encode()
        )
    poll_for(
        lambda: any("went away while sending sendmessage" in r.getMessage() for r in caplog.records),
        10.0,
        what="the one log line",
    )
    with urllib.request.urlopen(f"{api.base_url}{api.token}/getMe", timeout=10) as resp:
        assert json.loads(resp.read())["ok"] is True
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], caplog.text
