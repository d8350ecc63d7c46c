"""SlackTranslator with the real slack_sdk against LocalSlack: envelopes become InboundMessage /
CallbackPress and are acked only in confirm, replies go to the message's thread, 429 is RateLimited, and the
bot's own posts and edits are ignored."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from geode.messengers.bindings import Bindings, Turn
from geode.messengers.config import MessengerBinding
from geode.messengers.errors import NotPosted, PlatformError, RateLimited, Rejected
from geode.messengers.model import CallbackPress, InboundMessage
from geode.messengers.slack import SlackBatch, SlackTranslator
from geode.testing.slack_server import LocalSlack

CHANNEL = "C0GENERAL1"
ALICE = "U0ALICE01"
REDELIVER_S = 0.4  # for the tests of redelivery; the others never see one (30 s)
FAST = pytest.mark.parametrize("slack", [REDELIVER_S], indirect=True)


@pytest.fixture
def slack(request: pytest.FixtureRequest) -> Iterator[LocalSlack]:
    with LocalSlack(redeliver_after_s=getattr(request, "param", 30.0), max_retries=3) as server:
        yield server


def _translator(slack: LocalSlack, **kw: Any) -> SlackTranslator:
    kw.setdefault("poll_timeout_s", 5.0)
    return SlackTranslator(slack.bot_token, slack.app_token, base_url=slack.api_url, **kw)


@pytest.fixture
async def tr(slack: LocalSlack) -> AsyncIterator[SlackTranslator]:
    translator = _translator(slack)
    try:
        assert await translator.start() == "geode"
        yield translator
    finally:
        await translator.close()


async def _items(tr: SlackTranslator, want: int = 1) -> tuple[SlackBatch, list[Any]]:
    """Poll until ``want`` items came (a poll returns what arrived so far)."""
    batch = SlackBatch()
    while len(batch.items) < want:
        more = await tr.poll(None)
        assert more.items, f"nothing more arrived; got {batch.items}"
        batch.items.extend(more.items)
    return batch, [item for _, item in batch.items]


async def test_start_reads_the_bot_and_connects_socket_mode(slack: LocalSlack, tr: SlackTranslator) -> None:
    assert (tr.platform, tr.bot_id, tr.bot_name) == ("slack", slack.bot_user, "geode")
    assert slack.connections() == 1
    for bad in (
        SlackTranslator("xoxb-wrong", slack.app_token, base_url=slack.api_url),
        SlackTranslator(slack.bot_token, "xapp-wrong", base_url=slack.api_url),
    ):
        try:
            with pytest.raises(PlatformError) as caught:
                await bad.start()
        finally:
            await bad.close()
        assert not caught.value.retryable and "wrong" not in str(caught.value)


async def test_a_message_arrives_as_an_inbound_message(slack: LocalSlack, tr: SlackTranslator) -> None:
    pushed = slack.push_message(CHANNEL, "what is 2 &lt; 3 &amp; <https://x.example|x>?", user=ALICE)
    batch, [msg] = await _items(tr)
    assert batch.next_cursor is None and batch.items[0][0] == pushed["envelope_id"]
    assert msg == InboundMessage(
        platform="slack", chat_id=CHANNEL, thread_id=pushed["ts"], message_id=pushed["ts"], sender_id=ALICE,
        text="what is 2 < 3 & x (https://x.example)?", mentioned=False,
    )  # fmt: skip
    assert msg.channel_key == f"{CHANNEL}:{pushed['ts']}"  # a top-level message starts its own thread


async def test_a_mention_is_one_message_and_the_bindings_strip_it(
    slack: LocalSlack, tr: SlackTranslator
) -> None:
    pushed = slack.push_message(CHANNEL, "summarise the log", mention=True, thread_ts="1700000000.000100")
    _batch, items = await _items(tr, 2)  # the message event and the app_mention event
    assert len(pushed["event_ids"]) == 2
    assert {(m.message_id, m.channel_key, m.mentioned, m.text) for m in items} == {
        (pushed["ts"], f"{CHANNEL}:1700000000.000100", True, "@geode summarise the log")
    }  # both the same message: one dedupe key, one turn
    binding = MessengerBinding(platform="slack", channel_id=CHANNEL, require_mention=True)
    assert Bindings([binding]).classify(items[0], bot_username="geode") == Turn("summarise the log", binding)


@FAST
async def test_nothing_is_acked_before_confirm_and_unacked_envelopes_come_again(
    slack: LocalSlack, tr: SlackTranslator
) -> None:
    pushed = slack.push_message(CHANNEL, "hello")
    first, [msg] = await _items(tr)
    assert slack.acks() == []
    again, [msg2] = await _items(tr)  # redelivered after REDELIVER_S: never acked on receipt
    assert msg2 == msg and again.items[0][0] != first.items[0][0]
    sent = slack.envelopes()
    assert [(e["retry_attempt"], e["payload"]["event_id"]) for e in sent[:2]] == [
        (0, pushed["event_id"]), (1, pushed["event_id"]),
    ]  # fmt: skip
    await tr.confirm(again)
    assert await _acked(slack, [again.items[0][0]])
    sent_by_the_ack = len(slack.envelopes())  # 2, unless a slow machine let a third go out first
    quiet = await _translator_quiet(tr)
    assert len(slack.envelopes()) == sent_by_the_ack  # acked: no more redelivery
    assert len(quiet.items) == sent_by_the_ack - 2


async def test_a_retry_delivered_verbatim_normalises_to_the_same_message(
    slack: LocalSlack, tr: SlackTranslator
) -> None:
    slack.push_message(CHANNEL, "once")
    first, [msg] = await _items(tr)
    await tr.confirm(first)
    envelope = slack.envelopes()[0]
    slack.push_envelope({**envelope, "envelope_id": "retry-1", "retry_attempt": 1, "retry_reason": "timeout"})
    second, [dup] = await _items(tr)
    assert second.items[0][0] == "retry-1" and dup == msg  # same message id: the poller's dedupe drops it
    await tr.confirm(second)
    assert await _acked(slack, [first.items[0][0], "retry-1"])


async def test_replies_go_to_the_thread_and_long_text_is_split(
    slack: LocalSlack, tr: SlackTranslator
) -> None:
    top = slack.push_message(CHANNEL, "top-level question")
    threaded = slack.push_message(CHANNEL, "follow-up", thread_ts=top["ts"])
    batch, [msg_top, msg_thread] = await _items(tr, 2)
    assert msg_top.channel_key == msg_thread.channel_key  # the same conversation
    [ts] = await tr.send_text(msg_top.channel_key, "answer")
    await tr.send_text(msg_thread.channel_key, "second answer")
    small = _translator(slack, part_limit=20)
    small._web = tr._web  # only send_text is used
    parts = await small.send_text(f"{CHANNEL}:{top['ts']}", "line one is here\nline two is here\nthree")
    posts = slack.posts(CHANNEL)
    assert [(p["thread_ts"], p["text"]) for p in posts] == [
        (top["ts"], "answer"), (top["ts"], "second answer"),
        (top["ts"], "line one is here"), (top["ts"], "line two is here"), (top["ts"], "three"),
    ]  # fmt: skip
    assert posts[0]["ts"] == ts and [p["ts"] for p in posts[2:]] == parts
    assert threaded["thread_ts"] == top["ts"]
    await tr.send_text(CHANNEL, "to the channel", reply_to=top["ts"])  # reply_to threads a channel reply
    await tr.send_text("D0DIRECT01", "in a DM", reply_to="1700000000.000300")  # a DM stays flat
    assert [(p["channel"], p["thread_ts"]) for p in slack.posts()[-2:]] == [
        (CHANNEL, top["ts"]), ("D0DIRECT01", None),
    ]  # fmt: skip
    await tr.confirm(batch)


async def test_429_is_rate_limited_with_retry_after_and_errors_are_mapped(
    slack: LocalSlack, tr: SlackTranslator
) -> None:
    slack.fail_next("chat.postMessage", retry_after=7)
    with pytest.raises(RateLimited) as caught:
        await tr.send_text(CHANNEL, "hi")
    assert caught.value.retry_after_s == 7.0 and caught.value.retryable
    slack.fail_next("chat.postMessage", status=200, error="ratelimited", retry_after=3)
    with pytest.raises(RateLimited):
        await tr.send_text(CHANNEL, "hi")
    with pytest.raises(Rejected):
        await tr.send_text("#general", "hi")  # channel_not_found
    slack.fail_next("chat.postMessage", status=503)
    with pytest.raises(PlatformError) as failed:
        await tr.send_text(CHANNEL, "hi")
    assert failed.value.retryable and type(failed.value) is NotPosted  # a 5xx answer: known not posted
    assert slack.posts() == []
    assert await tr.send_text(CHANNEL, "   ") == []  # blank: nothing to post


async def test_a_reply_is_escaped_mrkdwn(slack: LocalSlack, tr: SlackTranslator) -> None:
    await tr.send_text(CHANNEL, "**Done**: <!channel> see [log](https://x.example/l?a=1&b=2)")
    [post] = slack.posts()
    assert post["text"] == "*Done*: &lt;!channel&gt; see <https://x.example/l?a=1&amp;b=2|log>"


async def test_approval_buttons_round_trip_into_a_callback_press(
    slack: LocalSlack, tr: SlackTranslator
) -> None:
    key = f"{CHANNEL}:1700000000.000100"
    ts = await tr.ask_approval(key, "Run `rm -rf build`?", [("Approve", "ap1:y"), ("Deny", "ap1:n")])
    [post] = slack.posts()
    assert (post["ts"], post["thread_ts"], post["text"]) == (ts, "1700000000.000100", "Run `rm -rf build`?")
    buttons = post["blocks"][1]["elements"]
    assert [(b["text"]["text"], b["value"]) for b in buttons] == [("Approve", "ap1:y"), ("Deny", "ap1:n")]
    slack.push_action(CHANNEL, ts, buttons[1]["action_id"], "ap1:n", user="U0BOB0001")
    batch, [press] = await _items(tr)
    assert isinstance(press, CallbackPress)
    assert (press.chat_id, press.thread_id, press.message_id, press.sender_id, press.data) == (
        CHANNEL, "1700000000.000100", ts, "U0BOB0001", "ap1:n",
    )  # fmt: skip
    assert press.channel_key == key
    assert await _acked(slack, [batch.items[0][0]])  # a press is acked on arrival (Slack's 3 s window)
    await tr.confirm(batch)
    await tr.answer_press(press.callback_id)  # nothing to say: no call
    assert slack.acks() == [batch.items[0][0]]  # not twice
    await tr.answer_press(press.callback_id, "You may not approve this.")
    [note] = slack.ephemerals()
    assert (note["user"], note["text"]) == ("U0BOB0001", "You may not approve this.")
    assert note["thread_ts"] == "1700000000.000100"
    await tr.edit_text(key, ts, "Denied by U0BOB0001.")
    [post] = slack.posts()
    assert (post["text"], post["blocks"], post["edited"]) == ("Denied by U0BOB0001.", [], True)
    with pytest.raises(Rejected):
        await tr.ask_approval(key, "too big", [("Approve", "x" * 2001)])
    assert len(slack.posts()) == 1
    await tr.typing(key)  # Slack has no typing indicator for bots: a no-op


async def test_own_posts_edits_joins_and_other_bots_are_not_messages() -> None:
    with LocalSlack(echo_bot_posts=True, redeliver_after_s=30.0) as echo:
        tr = _translator(echo)
        try:
            await tr.start()
            await tr.send_text(CHANNEL, "my own reply")
            pushed = echo.push_message(CHANNEL, "original")
            payload = {"type": "event_callback", "event_id": "Ev9", "event": {}}
            for event in (
                {"type": "message", "subtype": "message_changed", "channel": CHANNEL, "ts": "1.2",
                 "message": {"user": ALICE, "text": "edited", "ts": pushed["ts"]}},
                {"type": "message", "subtype": "channel_join", "channel": CHANNEL, "user": ALICE,
                 "ts": "1.3"},
                {"type": "message", "subtype": "bot_message", "channel": CHANNEL, "bot_id": "B0OTHER",
                 "ts": "1.4"},
                {"type": "reaction_added", "user": ALICE, "reaction": "eyes"},
                {"type": "message", "channel": CHANNEL, "user": "U0OTHERBOT", "bot_id": "B0OTHER",
                 "text": "beep", "ts": "1.5"},
            ):  # fmt: skip
                echo.push_envelope(
                    {"envelope_id": f"env-{event['ts'] if 'ts' in event else 'r'}", "type": "events_api",
                     "payload": {**payload, "event": event}, "retry_attempt": 0}
                )  # fmt: skip
            batch, items = await _items(tr, 7)
            assert items[0] is None  # the echo of the bot's own post
            assert isinstance(items[1], InboundMessage) and items[1].text == "original"
            assert items[2:6] == [None, None, None, None]
            other = items[6]
            assert isinstance(other, InboundMessage) and other.from_bot and other.sender_id == "U0OTHERBOT"
            await tr.confirm(batch)
        finally:
            await tr.close()


async def test_a_dm_is_addressed_to_the_bot_and_stays_flat(slack: LocalSlack, tr: SlackTranslator) -> None:
    pushed = slack.push_message("D0DIRECT01", "hi there")
    batch, [msg] = await _items(tr)
    assert (msg.channel_key, msg.mentioned, msg.message_id) == ("D0DIRECT01", True, pushed["ts"])
    await tr.send_text(msg.channel_key, "hello", reply_to=msg.message_id)
    assert slack.posts()[0]["thread_ts"] is None
    await tr.confirm(batch)


@FAST
async def test_an_envelope_never_confirmed_comes_to_the_next_translator(slack: LocalSlack) -> None:
    """A poller that died between storing the turn and the ack: Slack redelivers to the next connection."""
    tr = _translator(slack)
    await tr.start()
    slack.push_message(CHANNEL, "hello")
    batch, [msg] = await _items(tr)
    await tr.close()
    with pytest.raises(PlatformError):
        await tr.confirm(batch)
    with pytest.raises(PlatformError):
        await tr.poll(None)
    assert slack.acks() == []
    fresh = _translator(slack)
    try:
        await fresh.start()
        again, [msg2] = await _items(fresh)  # redelivered to the new connection
        assert msg2 == msg
        await fresh.confirm(again)
    finally:
        await fresh.close()


async def _acked(slack: LocalSlack, envelope_ids: list[str]) -> bool:
    deadline = asyncio.get_running_loop().time() + 5
    while slack.acks() != envelope_ids:
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"acks {slack.acks()} != {envelope_ids}")
        await asyncio.sleep(0.02)
    return True


async def _translator_quiet(tr: SlackTranslator) -> SlackBatch:
    """One poll that waits past several redelivery periods."""
    saved = tr._poll_timeout_s
    tr._poll_timeout_s = REDELIVER_S * 3
    try:
        return await tr.poll(None)
    finally:
        tr._poll_timeout_s = saved


@FAST
async def test_starting_again_replaces_the_link(slack: LocalSlack, tr: SlackTranslator) -> None:
    slack.push_message(CHANNEL, "before")
    _batch, [msg] = await _items(tr)
    await tr.start()  # e.g. the poller restarting its translator: the old link goes, nothing leaks
    assert len(slack.calls("apps.connections.open")) == 2
    again, [msg2] = await _items(tr)  # the unconfirmed envelope comes back on the new link
    assert msg2 == msg
    deadline = asyncio.get_running_loop().time() + 5
    while slack.connections() != 1:  # the old link is gone (the server notices its close)
        assert asyncio.get_running_loop().time() < deadline, slack.connections()
        await asyncio.sleep(0.02)
    await tr.confirm(again)
