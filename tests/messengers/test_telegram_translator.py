"""TelegramTranslator with the real python-telegram-bot against the local Bot API server: updates become
InboundMessage / CallbackPress, replies are split and fall back to plain text, and every failure arrives as
one of GEODE's platform errors."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Iterator

import pytest
from telegram import Bot

from geode.messengers.errors import Conflict, NotPosted, PlatformError, RateLimited, Rejected
from geode.messengers.model import CallbackPress, InboundMessage
from geode.messengers.telegram import TelegramTranslator
from geode.testing.bot_api_server import LocalBotApi
from tests.waiting import poll_for

CHAT = -100_555


@pytest.fixture
def api() -> Iterator[LocalBotApi]:
    with LocalBotApi() as server:
        yield server


@pytest.fixture
async def tr(api: LocalBotApi) -> AsyncIterator[TelegramTranslator]:
    translator = TelegramTranslator(api.token, base_url=api.base_url, poll_timeout_s=2)
    try:
        assert await translator.start() == "geode_test_bot"
        yield translator
    finally:
        await translator.close()


async def _poll(tr: TelegramTranslator, offset: int | None = None) -> list[object]:
    return [item for _, item in (await tr.poll(offset)).items]


async def test_start_checks_the_token_and_deletes_the_webhook(
    api: LocalBotApi, tr: TelegramTranslator
) -> None:
    assert tr.bot_id == api.bot_id
    assert [c["status"] for c in api.calls("getMe")] == [200]
    assert len(api.calls("deleteWebhook")) == 1
    bad = TelegramTranslator("999:wrong", base_url=api.base_url, poll_timeout_s=1)
    try:
        with pytest.raises(PlatformError) as caught:
            await bad.start()
    finally:
        await bad.close()
    assert not caught.value.retryable and "999:wrong" not in str(caught.value)


async def test_messages_and_presses_are_normalised(api: LocalBotApi, tr: TelegramTranslator) -> None:
    api.push_message(CHAT, "plain words", sender_id=7, username="bob")
    api.push_message(CHAT, "hey @Geode_Test_Bot what now?", sender_id=7)
    api.push_message(CHAT, "@someone_else look", sender_id=7)
    api.push_message(CHAT, "and this?", sender_id=7, reply_to_bot=True)
    api.push_message(CHAT, "fixed typo", sender_id=7, message_id=1, edited=True)
    api.push_message(CHAT, "beep", sender_id=8, username="other_bot", is_bot=True)
    api.push_callback(CHAT, 1, "ap:9:n", sender_id=7)
    items = await _poll(tr)
    msgs = [m for m in items if isinstance(m, InboundMessage)]
    assert [(m.text, m.mentioned) for m in msgs] == [
        ("plain words", False),
        ("hey @Geode_Test_Bot what now?", True),
        ("@someone_else look", False),
        ("and this?", True),
        ("fixed typo", False),
        ("beep", False),
    ]
    first = msgs[0]
    assert (first.platform, first.chat_id, first.thread_id, first.message_id) == (
        "telegram",
        str(CHAT),
        "",
        "1",
    )
    assert (first.sender_id, first.sender_name, first.channel_key) == ("7", "bob", str(CHAT))
    assert [m.edited for m in msgs] == [False] * 4 + [True, False]
    assert [m.from_bot for m in msgs] == [False] * 5 + [True]
    press = items[-1]
    assert isinstance(press, CallbackPress)
    assert (press.chat_id, press.message_id, press.sender_id, press.data) == (str(CHAT), "1", "7", "ap:9:n")


async def test_offset_confirms_and_long_poll_wakes_on_push(api: LocalBotApi, tr: TelegramTranslator) -> None:
    api.push_message(CHAT, "one")
    batch = await tr.poll(None)
    ((update_id, _),) = batch.items
    assert batch.next_cursor == str(int(update_id) + 1)
    # confirmed: not delivered again (waited out the long poll)
    assert (await tr.poll(batch.next_cursor)).items == []
    task = asyncio.create_task(tr.poll(batch.next_cursor))
    await asyncio.to_thread(poll_for, lambda: api.polling, 10.0, what="a waiting getUpdates")
    await asyncio.to_thread(api.push_message, CHAT, "two")
    got = await asyncio.wait_for(task, 1.5)  # before the 2 s long poll would have ended
    assert [m.text for _, m in got.items if isinstance(m, InboundMessage)] == ["two"]


async def test_topic_message_and_reply_stay_in_the_thread(api: LocalBotApi, tr: TelegramTranslator) -> None:
    api.push_message(CHAT, "in a topic", thread_id=42)
    (msg,) = await _poll(tr)
    assert isinstance(msg, InboundMessage) and msg.thread_id == "42" and msg.channel_key == f"{CHAT}:42"
    ids = await tr.send_text(msg.channel_key, "answer", reply_to=msg.message_id)
    (post,) = api.posts(CHAT)
    assert [str(post["message_id"])] == ids
    assert (post["thread_id"], post["reply_to"], post["text"]) == (42, int(msg.message_id), "answer")


async def test_webhook_and_second_poller_raise_conflict(api: LocalBotApi, tr: TelegramTranslator) -> None:
    async with Bot(api.token, base_url=api.base_url) as other:
        await other.set_webhook("https://example.invalid/hook")
        with pytest.raises(Conflict, match="webhook is active"):
            await tr.poll(None)
        await other.delete_webhook()
    second = TelegramTranslator(api.token, base_url=api.base_url, poll_timeout_s=1)
    try:
        await second.start()
        first_poll = asyncio.create_task(tr.poll(None))
        await asyncio.to_thread(poll_for, lambda: api.polling, 10.0, what="a waiting getUpdates")
        await second.poll(None)
        with pytest.raises(Conflict, match="terminated by other getUpdates request") as caught:
            await asyncio.wait_for(first_poll, 10)
        assert caught.value.retryable
    finally:
        await second.close()


async def test_rate_limit_and_rejection_map_to_platform_errors(
    api: LocalBotApi, tr: TelegramTranslator
) -> None:
    api.fail_next("sendMessage", status=429, retry_after=2)
    with pytest.raises(RateLimited) as limited:
        await tr.send_text(str(CHAT), "hi")
    assert limited.value.retry_after_s == 2 and limited.value.retryable
    api.fail_next("sendMessage", status=400, description="Bad Request: chat not found")
    with pytest.raises(Rejected, match=r"(?i)chat not found") as rejected:
        await tr.send_text(str(CHAT), "hi")
    assert not rejected.value.retryable
    with pytest.raises(Rejected):
        await tr.send_text("not-a-chat", "hi")
    api.fail_next("sendChatAction", status=502)
    with pytest.raises(PlatformError) as down:
        await tr.typing(str(CHAT))
    assert down.value.retryable and type(down.value) is NotPosted  # a 5xx answer: known not posted
    assert api.posts(CHAT) == []


async def test_long_reply_is_split_on_line_boundaries(api: LocalBotApi, tr: TelegramTranslator) -> None:
    lines = [f"line {i:04d} " + "x" * 90 for i in range(120)]  # about 12,000 characters
    asked = api.push_message(CHAT, "tell me everything")["message"]["message_id"]
    ids = await tr.send_text(str(CHAT), "\n".join(lines), reply_to=str(asked))
    posts = api.posts(CHAT)
    assert len(posts) == len(ids) >= 3
    assert [p["reply_to"] for p in posts] == [asked] + [None] * (len(posts) - 1)
    assert all(len(p["text"]) <= 4096 for p in posts)
    assert [line for p in posts for line in p["text"].split("\n")] == lines


async def test_markdown_the_server_rejects_is_sent_plain(api: LocalBotApi, tr: TelegramTranslator) -> None:
    await tr.send_text(str(CHAT), "*bold* is fine")
    await tr.send_text(str(CHAT), "2 * 3 = 6, and snake_case")
    assert [(p["text"], p["parse_mode"]) for p in api.posts(CHAT)] == [
        ("*bold* is fine", "Markdown"),
        ("2 * 3 = 6, and snake_case", None),
    ]
    assert [c["status"] for c in api.calls("sendMessage")] == [200, 400, 200]


async def test_typing_is_recorded_in_the_thread(api: LocalBotApi, tr: TelegramTranslator) -> None:
    await tr.typing(f"{CHAT}:42")
    await tr.typing("77")
    assert [(a["chat_id"], a["thread_id"], a["action"]) for a in api.actions()] == [
        (CHAT, 42, "typing"),
        (77, None, "typing"),
    ]


async def test_approval_keyboard_round_trip(api: LocalBotApi, tr: TelegramTranslator) -> None:
    buttons = [("Approve", "ap:abc:y"), ("Deny", "ap:abc:n"), ("Always for this session", "ap:abc:a")]
    mid = await tr.ask_approval(str(CHAT), "Run `rm -rf build`?", buttons)
    (post,) = api.posts(CHAT)
    keyboard = post["reply_markup"]["inline_keyboard"]
    assert [(b["text"], b["callback_data"]) for row in keyboard for b in row] == buttons
    assert post["parse_mode"] is None  # tool arguments are not markup
    api.push_callback(CHAT, int(mid), "ap:abc:n", sender_id=7)
    (press,) = await _poll(tr)
    assert isinstance(press, CallbackPress) and press.data == "ap:abc:n" and press.message_id == mid
    await tr.answer_press(press.callback_id, "Denied")
    await tr.edit_text(press.channel_key, mid, "Run `rm -rf build`? Denied by 7.")
    await tr.edit_text(press.channel_key, mid, "Run `rm -rf build`? Denied by 7.")  # a retry is harmless
    (post,) = api.posts(CHAT)
    assert (post["text"], post["reply_markup"]) == ("Run `rm -rf build`? Denied by 7.", None)
    assert [c["status"] for c in api.calls("answerCallbackQuery")] == [200]
    with pytest.raises(ValueError):
        await tr.ask_approval(str(CHAT), "?", [("x", "d" * 65)])


async def test_server_down_is_retryable_and_token_stays_out_of_logs(
    api: LocalBotApi, tr: TelegramTranslator, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    await tr.typing(str(CHAT))
    api.stop()
    with pytest.raises(PlatformError) as caught:
        await tr.poll(None)
    assert caught.value.retryable
    assert api.token not in caplog.text and api.token not in str(caught.value)
    assert "<token>" in caplog.text  # httpx logged the request URL, redacted
    api.push_message(CHAT, "sent while the server was down")
    api.start()  # same port, same pending updates
    assert [m.text for m in await _poll(tr) if isinstance(m, InboundMessage)] == [
        "sent while the server was down"
    ]


async def test_restart_after_close_keeps_working(api: LocalBotApi, tr: TelegramTranslator) -> None:
    await tr.close()  # an in-process poller restart reuses the translator
    assert await tr.start() == "geode_test_bot"
    api.push_message(CHAT, "after restart")
    assert [m.text for m in await _poll(tr) if isinstance(m, InboundMessage)] == ["after restart"]
