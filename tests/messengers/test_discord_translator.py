"""DiscordTranslator with the real discord.py against the local Discord server: gateway events become
InboundMessage / CallbackPress, replies reference the message (in its thread), a dropped gateway resumes
without delivering an old message again, and a 429 arrives as RateLimited."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator

import pytest

from geode.messengers.bindings import Bindings, Ignore, Turn
from geode.messengers.config import MessengerBinding
from geode.messengers.discord import DiscordTranslator
from geode.messengers.discord_config import DiscordSettings
from geode.messengers.errors import PlatformError, RateLimited, Rejected
from geode.messengers.model import CallbackPress, InboundMessage
from geode.testing.discord_server import BOT_ID, CHANNELS, THREADS, USER_ID, LocalDiscord

CHANNEL = CHANNELS[0]
THREAD = next(iter(THREADS))
Item = InboundMessage | CallbackPress | None


@pytest.fixture
def dc() -> Iterator[LocalDiscord]:
    with LocalDiscord() as server:
        yield server


def _translator(dc: LocalDiscord, token: str | None = None) -> DiscordTranslator:
    return DiscordTranslator(
        token or dc.token, base_url=dc.api_base, gateway_url=dc.gateway_url, poll_timeout_s=5,
        connect_timeout_s=10, guild_ready_timeout_s=0.05,
    )  # fmt: skip


@pytest.fixture
async def tr(dc: LocalDiscord) -> AsyncIterator[DiscordTranslator]:
    translator = _translator(dc)
    try:
        assert await translator.start() == "geode_test_bot"
        yield translator
    finally:
        await translator.close()


async def _items(tr: DiscordTranslator, count: int, *, keep_none: bool = False) -> list[Item]:
    """The next ``count`` items (None items skipped unless ``keep_none``), over as many polls as needed."""
    got: list[Item] = []
    async with asyncio.timeout(10):
        while len(got) < count:
            batch = await tr.poll(None)
            assert batch.next_cursor is None
            got.extend(item for _, item in batch.items if keep_none or item is not None)
    return got


async def _nothing_more(tr: DiscordTranslator, dc: LocalDiscord) -> list[Item]:
    """Everything delivered up to a marker message pushed now (the marker itself left out)."""
    marker = dc.push_message(CHANNEL, "marker")
    got: list[Item] = []
    async with asyncio.timeout(10):
        while not any(isinstance(i, InboundMessage) and i.message_id == marker["id"] for i in got):
            got.extend(item for _, item in (await tr.poll(None)).items)
    return got[:-1]


async def test_start_logs_in_and_waits_for_ready(dc: LocalDiscord, tr: DiscordTranslator) -> None:
    assert tr.bot_id == str(BOT_ID) and tr.platform == "discord"
    assert dc.identify_count() == 1 and dc.connected()
    assert [c["status"] for c in dc.calls("get_user")] == [200]
    assert [c["status"] for c in dc.calls("application_info")] == [200]


async def test_the_settings_point_the_translator_at_the_server(dc: LocalDiscord) -> None:
    settings = DiscordSettings(base_url=dc.api_base + "/", gateway_url=dc.gateway_url, poll_timeout_s=0.2)
    translator = DiscordTranslator.from_settings(dc.token, settings)
    try:
        assert await translator.start() == dc.bot_name
        assert (await translator.poll(None)).items == []  # nothing pushed: empty after the poll timeout
    finally:
        await translator.close()
    assert dc.calls("get_user")[0]["path"] == "/api/v10/users/@me"


async def test_a_mention_that_arrives_with_ready_is_recognised(dc: LocalDiscord) -> None:
    early_msg = dc.push_message(CHANNEL, "early?", mention_bot=True)  # no session yet: not delivered, so
    dc.push_on_identify("MESSAGE_CREATE", early_msg)  # sent again right after READY, before on_ready
    translator = _translator(dc)
    try:
        await translator.start()
        (early,) = await _items(translator, 1)
    finally:
        await translator.close()
    assert isinstance(early, InboundMessage)
    assert (early.text, early.mentioned) == ("@geode_test_bot early?", True)


async def test_a_refused_token_is_a_platform_error_that_names_no_token(dc: LocalDiscord) -> None:
    bad = _translator(dc, token="not-the-token")
    try:
        with pytest.raises(PlatformError) as caught:
            await bad.start()
    finally:
        await bad.close()
    assert not caught.value.retryable and "not-the-token" not in str(caught.value)


async def test_a_bot_without_the_message_content_intent_enabled_is_told_so() -> None:
    with LocalDiscord(message_content_enabled=False) as dc:
        translator = _translator(dc)
        try:
            with pytest.raises(PlatformError) as caught:
                await translator.start()
        finally:
            await translator.close()
    assert not caught.value.retryable and "MESSAGE_CONTENT" in str(caught.value)


async def test_a_message_arrives_normalised(dc: LocalDiscord, tr: DiscordTranslator) -> None:
    plain = dc.push_message(CHANNEL, "plain words", author_id=USER_ID, author_name="alice")
    dc.push_message(CHANNEL, "what now?", mention_bot=True)
    in_thread = dc.push_message(CHANNEL, "in the thread", thread_id=THREAD)
    first, mention, threaded = await _items(tr, 3)
    assert isinstance(first, InboundMessage) and isinstance(mention, InboundMessage)
    assert (first.platform, first.chat_id, first.thread_id, first.message_id, first.sender_id) == (
        "discord", str(CHANNEL), "", plain["id"], str(USER_ID),
    )  # fmt: skip
    assert (first.text, first.mentioned, first.from_bot, first.sender_name) == (
        "plain words",
        False,
        False,
        "alice",
    )
    # <@id> reads as @name, which bindings strips like any @mention
    assert (mention.text, mention.mentioned) == ("@geode_test_bot what now?", True)
    binding = MessengerBinding(platform="discord", channel_id=str(CHANNEL), require_mention=True)
    verdict = Bindings([binding]).classify(mention, bot_username=tr.bot_name)
    assert isinstance(verdict, Turn) and verdict.text == "what now?"
    assert isinstance(threaded, InboundMessage)
    assert (threaded.chat_id, threaded.thread_id, threaded.message_id) == (
        str(CHANNEL),
        str(THREAD),
        in_thread["id"],
    )
    assert threaded.channel_key == f"{CHANNEL}:{THREAD}"


async def test_delivery_ids_are_the_session_and_the_event_sequence(
    dc: LocalDiscord, tr: DiscordTranslator
) -> None:
    dc.push_message(CHANNEL, "one")
    dc.push_message(CHANNEL, "two")
    ids: list[str] = []
    async with asyncio.timeout(10):
        while len(ids) < 2:
            ids.extend(delivery for delivery, _ in (await tr.poll(None)).items)
    (session, first), (same, second) = (i.split(":") for i in ids)
    assert session == same and len(session) == 32
    assert (int(first), int(second)) == (3, 4)  # after READY (1) and GUILD_CREATE (2)


async def test_a_reply_references_the_message_and_its_echo_is_not_a_message(
    dc: LocalDiscord, tr: DiscordTranslator
) -> None:
    asked = dc.push_message(CHANNEL, "hello?")
    (msg,) = await _items(tr, 1)
    assert isinstance(msg, InboundMessage)
    ids = await tr.send_text(msg.channel_key, "hi back", reply_to=msg.message_id)
    (post,) = dc.posts(CHANNEL)
    assert (post["content"], post["reply_to"], [str(post["message_id"])]) == ("hi back", asked["id"], ids)
    sent = dc.calls("send_message")[0]["json"]
    assert sent["allowed_mentions"] == {"parse": [], "replied_user": False}
    # the gateway echoes the bot's own post: it is left out, never a message to answer
    assert await _nothing_more(tr, dc) == []


async def test_a_reply_to_the_bot_counts_as_a_mention_and_other_bots_are_ignored(
    dc: LocalDiscord, tr: DiscordTranslator
) -> None:
    (posted_id,) = await tr.send_text(str(CHANNEL), "I am the bot")
    dc.push_message(CHANNEL, "about that", reply_to=int(posted_id))
    dc.push_message(CHANNEL, "beep", author_id=77, author_name="other_bot", bot=True)
    reply, other = await _items(tr, 2)
    assert isinstance(reply, InboundMessage) and reply.mentioned and not reply.from_bot
    assert isinstance(other, InboundMessage) and other.from_bot
    binding = MessengerBinding(platform="discord", channel_id=str(CHANNEL))
    assert Bindings([binding]).classify(other, bot_username=tr.bot_name) == Ignore("bot")


async def test_a_system_message_is_a_none_item(dc: LocalDiscord, tr: DiscordTranslator) -> None:
    said = dc.push_message(CHANNEL, "hi")
    dc.push_raw("MESSAGE_CREATE", {**said, "id": str(int(said["id"]) + 1), "type": 7})  # "alice joined"
    message, joined = await _items(tr, 2, keep_none=True)
    assert isinstance(message, InboundMessage) and joined is None


async def test_a_thread_message_is_answered_in_the_thread(dc: LocalDiscord, tr: DiscordTranslator) -> None:
    asked = dc.push_message(CHANNEL, "in the thread", thread_id=THREAD)
    (msg,) = await _items(tr, 1)
    assert isinstance(msg, InboundMessage)
    await tr.send_text(msg.channel_key, "answer", reply_to=msg.message_id)
    assert dc.posts(CHANNEL) == []
    (post,) = dc.posts(THREAD)
    assert (post["content"], post["reply_to"]) == ("answer", asked["id"])


async def test_a_long_reply_is_split_at_2000_characters_on_lines(
    dc: LocalDiscord, tr: DiscordTranslator
) -> None:
    text = "\n".join(f"line {i:04d} " + "x" * 90 for i in range(60))  # ~6,000 characters
    ids = await tr.send_text(str(CHANNEL), text, reply_to="")
    posts = dc.posts(CHANNEL)
    assert [str(p["message_id"]) for p in posts] == ids and len(ids) == 4
    assert all(len(p["content"]) <= 2000 for p in posts)
    assert "\n".join(p["content"] for p in posts) == text


async def test_a_gateway_drop_resumes_without_delivering_old_messages(
    dc: LocalDiscord, tr: DiscordTranslator
) -> None:
    old = dc.push_message(CHANNEL, "before the drop")
    (first,) = await _items(tr, 1)
    assert isinstance(first, InboundMessage) and first.message_id == old["id"]
    await asyncio.to_thread(dc.drop_gateway, 4000)
    new = dc.push_message(CHANNEL, "while away")  # buffered by the gateway, replayed on RESUME
    (second,) = await _items(tr, 1)
    assert isinstance(second, InboundMessage) and second.message_id == new["id"]
    assert (dc.resume_count(), dc.identify_count()) == (1, 1)
    assert await _nothing_more(tr, dc) == []


async def test_a_resume_that_replays_seen_messages_delivers_them_once(
    dc: LocalDiscord, tr: DiscordTranslator
) -> None:
    old = [dc.push_message(CHANNEL, "one"), dc.push_message(CHANNEL, "two", thread_id=THREAD)]
    assert [i.message_id for i in await _items(tr, 2) if i is not None] == [m["id"] for m in old]
    await asyncio.to_thread(dc.drop_gateway, 4000, replay_seen=True)  # the gateway re-sends both
    assert await _nothing_more(tr, dc) == []
    assert dc.resume_count() == 1 and tr.dropped_replays == 2


async def test_buttons_round_trip_into_a_press_and_an_interaction_response(
    dc: LocalDiscord, tr: DiscordTranslator
) -> None:
    buttons = [("Approve", "ap:1:y"), ("Deny", "ap:1:n"), ("Always for this session", "ap:1:a")]
    message_id = await tr.ask_approval(f"{CHANNEL}:{THREAD}", "Run `ls`?", buttons)
    (post,) = dc.posts(THREAD)
    (row,) = post["components"]
    assert [(b["label"], b["custom_id"]) for b in row["components"]] == buttons
    dc.push_button(THREAD, message_id, "ap:1:n", user_id=USER_ID)
    (press,) = await _items(tr, 1)
    assert isinstance(press, CallbackPress)
    where = (press.platform, press.chat_id, press.thread_id, press.message_id)
    assert where == ("discord", str(CHANNEL), str(THREAD), message_id)
    assert (press.sender_id, press.data) == (str(USER_ID), "ap:1:n")
    await tr.answer_press(press.callback_id, "Denied.")
    ack, followup = dc.interaction_responses()
    assert ack["type"] == 6  # acknowledged on arrival, within Discord's 3 s
    assert (followup["type"], followup["data"]["content"]) == ("followup", "Denied.")
    assert followup["data"]["flags"] == 64  # ephemeral: the presser alone sees it
    with pytest.raises(Rejected):
        await tr.answer_press(press.callback_id)  # answered already
    await tr.edit_text(f"{CHANNEL}:{THREAD}", message_id, "Denied by alice.")
    (edited,) = dc.posts(THREAD)
    assert (edited["content"], edited["components"], edited["edited"]) == ("Denied by alice.", [], True)


async def test_a_press_is_acknowledged_on_arrival_whatever_the_poller_does(
    dc: LocalDiscord, tr: DiscordTranslator
) -> None:
    message_id = await tr.ask_approval(str(CHANNEL), "Run it?", [("Approve", "ap:2:y")])
    dc.push_button(CHANNEL, message_id, "ap:2:y")
    (press,) = await _items(tr, 1)
    assert isinstance(press, CallbackPress) and press.thread_id == ""
    async with asyncio.timeout(5):
        while not dc.interaction_responses():
            await asyncio.sleep(0.02)
    assert [r["type"] for r in dc.interaction_responses()] == [6]
    await tr.answer_press(press.callback_id)  # nothing to say: the acknowledgement was the answer
    assert [r["type"] for r in dc.interaction_responses()] == [6]


async def test_a_custom_id_over_100_characters_is_rejected_before_posting(
    dc: LocalDiscord, tr: DiscordTranslator
) -> None:
    with pytest.raises(Rejected):
        await tr.ask_approval(str(CHANNEL), "Run it?", [("Approve", "x" * 101)])
    assert dc.calls("send_message") == []


async def test_a_long_429_is_rate_limited_and_a_short_one_is_waited_out(
    dc: LocalDiscord, tr: DiscordTranslator
) -> None:
    dc.fail_next("send_message", retry_after=60)
    with pytest.raises(RateLimited) as caught:
        await tr.send_text(str(CHANNEL), "hello")
    assert caught.value.retry_after_s == 60 and dc.posts() == []
    dc.fail_next("typing", retry_after=0.2)  # discord.py honours a short Retry-After itself and retries
    await tr.typing(f"{CHANNEL}:{THREAD}")
    assert [c["status"] for c in dc.calls("typing")] == [429, 204]
    assert dc.calls("typing")[-1]["path"].endswith(f"/channels/{THREAD}/typing")


async def test_a_post_whose_response_was_lost_is_not_posted_twice_by_discord_py_retrying(
    dc: LocalDiscord, tr: DiscordTranslator
) -> None:
    dc.fail_next("send_message", status=500, applied=True)  # posted, then a 500: discord.py retries in 1 s
    ids = await tr.send_text(str(CHANNEL), "only once")
    assert [c["status"] for c in dc.calls("send_message")] == [500, 200]
    assert [(str(p["message_id"]), p["content"]) for p in dc.posts()] == [(ids[0], "only once")]
    first, retry = (c["json"] for c in dc.calls("send_message"))
    assert first["nonce"] == retry["nonce"] and first["enforce_nonce"] is True and len(first["nonce"]) <= 25


async def test_an_unknown_channel_is_rejected(dc: LocalDiscord, tr: DiscordTranslator) -> None:
    with pytest.raises(Rejected):
        await tr.send_text("999", "hello")
    with pytest.raises(Rejected):
        await tr.send_text("not-a-channel", "hello")


async def test_a_poll_while_the_gateway_is_down_is_a_retryable_error(dc: LocalDiscord) -> None:
    translator = DiscordTranslator(
        dc.token, base_url=dc.api_base, gateway_url=dc.gateway_url, poll_timeout_s=0.3,
        guild_ready_timeout_s=0.05,
    )  # fmt: skip
    try:
        await translator.start()
        assert translator.connected
        await asyncio.to_thread(dc.stop)
        with pytest.raises(PlatformError) as caught:
            async with asyncio.timeout(10):
                while True:
                    await translator.poll(None)
        assert caught.value.retryable and not translator.connected
    finally:
        await translator.close()


async def test_a_restarted_translator_identifies_anew_and_delivers_only_new_messages(
    dc: LocalDiscord, tr: DiscordTranslator
) -> None:
    old = dc.push_message(CHANNEL, "before the restart")
    (first,) = await _items(tr, 1)
    assert isinstance(first, InboundMessage) and first.message_id == old["id"]
    await tr.close()
    assert await tr.start() == "geode_test_bot"
    assert dc.identify_count() == 2
    dc.push_raw("MESSAGE_CREATE", old)  # even if the gateway sent the old message again
    new = dc.push_message(CHANNEL, "after the restart")
    (second,) = await _items(tr, 1)
    assert isinstance(second, InboundMessage) and second.message_id == new["id"]
    assert tr.dropped_replays == 1


async def test_a_cancelled_poll_loses_nothing(dc: LocalDiscord, tr: DiscordTranslator) -> None:
    waiting = asyncio.create_task(tr.poll(None))
    await asyncio.sleep(0)  # let it start waiting
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    sent = dc.push_message(CHANNEL, "after the cancel")
    (msg,) = await _items(tr, 1)
    assert isinstance(msg, InboundMessage) and msg.message_id == sent["id"]
