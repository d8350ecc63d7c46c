"""Which inbound messages become turns: unbound chats, senders, bots, edits, mentions, commands, topics."""

from __future__ import annotations

from typing import Any

import pytest

from geode.messengers.bindings import Bindings, Command, Ignore, Turn, strip_mention
from geode.messengers.config import MessengerBinding
from geode.messengers.model import InboundMessage

BOT = "geode_bot"
GROUP = "-1001234567890"


def _b(channel_id: str, **kw: Any) -> MessengerBinding:
    return MessengerBinding(platform="telegram", channel_id=channel_id, **kw)


def _msg(text: str, chat_id: str = GROUP, **kw: Any) -> InboundMessage:
    fields: dict[str, Any] = {"message_id": "10", "sender_id": "501"} | kw
    return InboundMessage(platform="telegram", chat_id=chat_id, text=text, **fields)


OPEN = _b(GROUP)  # anyone in the group, no mention needed
STRICT = _b("-100777", require_mention=True, allowed_senders=["501", "502"], approvers=["502"])
FORUM_CHAT = _b("-100900")  # a forum: every topic is bound by the chat binding ...
FORUM_TOPIC = _b("-100900:5", require_mention=True)  # ... except topic 5, which has its own binding
BINDINGS = Bindings([OPEN, STRICT, FORUM_CHAT, FORUM_TOPIC])


def test_an_unbound_chat_is_ignored() -> None:
    assert BINDINGS.classify(_msg("hello", chat_id="-100555"), bot_username=BOT) == Ignore("unbound")
    assert BINDINGS.classify(_msg("hello", chat_id="42"), bot_username=BOT) == Ignore("unbound")
    slack = InboundMessage(platform="slack", chat_id=GROUP, message_id="1", sender_id="5", text="hi")
    assert BINDINGS.classify(slack, bot_username=BOT) == Ignore("unbound")  # bindings are per platform


def test_a_bound_chat_gets_a_turn_with_the_text() -> None:
    assert BINDINGS.classify(_msg("  what is 2+2?\n"), bot_username=BOT) == Turn("what is 2+2?", OPEN)


def test_only_allowed_senders_are_heard() -> None:
    msg = _msg(f"@{BOT} hi", chat_id="-100777", sender_id="999", mentioned=True)
    assert BINDINGS.classify(msg, bot_username=BOT) == Ignore("sender")
    ok = _msg(f"@{BOT} hi", chat_id="-100777", sender_id="502", mentioned=True)
    assert BINDINGS.classify(ok, bot_username=BOT) == Turn("hi", STRICT)
    assert BINDINGS.classify(_msg("/new", chat_id="-100777", sender_id="999"), bot_username=BOT) == Ignore(
        "sender"
    )  # a disallowed sender cannot reset the chat's session either


def test_bots_are_ignored_the_bot_itself_and_others() -> None:
    own = _msg("my own reply", sender_id="7000", from_bot=True)
    other = _msg(f"@{BOT} ping", sender_id="7001", from_bot=True, mentioned=True)
    assert BINDINGS.classify(own, bot_username=BOT) == Ignore("bot")
    assert BINDINGS.classify(other, bot_username=BOT) == Ignore("bot")
    assert BINDINGS.classify(_msg("/new", from_bot=True), bot_username=BOT) == Ignore("bot")


def test_edits_are_ignored() -> None:
    assert BINDINGS.classify(_msg("fixed typo", edited=True), bot_username=BOT) == Ignore("edited")


def test_require_mention_without_a_mention_is_ignored() -> None:
    msg = _msg("just chatting among humans", chat_id="-100777")
    assert BINDINGS.classify(msg, bot_username=BOT) == Ignore("no_mention")
    other = _msg("@someone_else look", chat_id="-100777")  # another user's mention does not count
    assert BINDINGS.classify(other, bot_username=BOT) == Ignore("no_mention")
    near = _msg(f"@{BOT}2 look", chat_id="-100777")  # a longer username is another account
    assert BINDINGS.classify(near, bot_username=BOT) == Ignore("no_mention")


def test_require_mention_with_a_mention_is_a_turn_without_it() -> None:
    msg = _msg(f"@{BOT} summarise the thread", chat_id="-100777")  # found in the text
    assert BINDINGS.classify(msg, bot_username=BOT) == Turn("summarise the thread", STRICT)
    upper = _msg("hey @Geode_Bot, what's up?", chat_id="-100777")  # usernames are case-insensitive
    assert BINDINGS.classify(upper, bot_username=BOT) == Turn("hey, what's up?", STRICT)
    reply = _msg("and then?", chat_id="-100777", mentioned=True)  # a reply to the bot (translator's flag)
    assert BINDINGS.classify(reply, bot_username=f"@{BOT}") == Turn("and then?", STRICT)


def test_only_the_bots_mention_is_stripped() -> None:
    assert strip_mention(f"@{BOT}, list files", BOT) == "list files"
    assert strip_mention(f"ask @alice and @{BOT} too", BOT) == "ask @alice and too"
    assert strip_mention(f"mail a@{BOT}.com", BOT) == f"mail a@{BOT}.com"  # not a mention
    assert strip_mention(f"line one\n@{BOT} line two\n    code", BOT) == "line one\nline two\n    code"
    assert strip_mention("no mention at all", "") == "no mention at all"


def test_a_message_that_is_only_the_mention_is_empty() -> None:
    assert BINDINGS.classify(_msg(f"  @{BOT}  "), bot_username=BOT) == Ignore("empty")
    assert BINDINGS.classify(_msg(""), bot_username=BOT) == Ignore("empty")  # e.g. a photo without caption


@pytest.mark.parametrize("text", ["/new", "/new@geode_bot", "/NEW@Geode_Bot", "/new please", " /new "])
def test_new_is_a_command(text: str) -> None:
    assert BINDINGS.classify(_msg(text), bot_username=BOT) == Command("new", OPEN)


@pytest.mark.parametrize("text", ["/status", f"/status@{BOT}"])
def test_status_is_a_command_also_where_a_mention_is_required(text: str) -> None:
    assert BINDINGS.classify(_msg(text, chat_id="-100777"), bot_username=BOT) == Command("status", STRICT)


@pytest.mark.parametrize("text", [f"@{BOT} /new", f"@{BOT.upper()}, /new", f"  @{BOT}:  /new  later"])
def test_a_command_after_the_bots_leading_mention_is_the_command(text: str) -> None:
    """Slack takes a message starting with "/" as its own slash command: there one writes ``@bot /new``."""
    slack = MessengerBinding(platform="slack", channel_id="C0123ABCD", require_mention=True)
    msg = InboundMessage(
        platform="slack", chat_id="C0123ABCD", thread_id="1712.34", message_id="1712.34", sender_id="U1",
        text=text, mentioned=True,
    )  # fmt: skip
    assert Bindings([slack]).classify(msg, bot_username=BOT) == Command("new", slack)
    assert BINDINGS.classify(_msg(text), bot_username=BOT) == Command("new", OPEN)


def test_a_command_after_another_mention_or_mid_text_is_not_one() -> None:
    assert BINDINGS.classify(_msg("@someone /new"), bot_username=BOT) == Turn("@someone /new", OPEN)
    assert BINDINGS.classify(_msg(f"hey @{BOT} /new"), bot_username=BOT) == Turn("hey /new", OPEN)


def test_another_bots_command_and_near_misses() -> None:
    assert BINDINGS.classify(_msg("/new@other_bot"), bot_username=BOT) == Ignore("no_mention")
    assert BINDINGS.classify(_msg("/newest idea"), bot_username=BOT) == Turn("/newest idea", OPEN)
    assert BINDINGS.classify(_msg("tell me about /new"), bot_username=BOT) == Turn("tell me about /new", OPEN)
    start = _msg(f"/start@{BOT}", chat_id="-100777")  # addressed to this bot: no further mention needed
    assert BINDINGS.classify(start, bot_username=BOT) == Turn("/start", STRICT)


def test_a_topic_binding_wins_over_its_chat_binding() -> None:
    assert BINDINGS.find("telegram", "-100900", "5") is FORUM_TOPIC
    assert BINDINGS.find("telegram", "-100900", "6") is FORUM_CHAT  # other topics: the chat's binding
    assert BINDINGS.find("telegram", "-100900") is FORUM_CHAT
    in_topic = _msg("hello", chat_id="-100900", thread_id="5")
    assert BINDINGS.classify(in_topic, bot_username=BOT) == Ignore("no_mention")  # topic 5 needs a mention
    other_topic = _msg("hello", chat_id="-100900", thread_id="6")
    assert BINDINGS.classify(other_topic, bot_username=BOT) == Turn("hello", FORUM_CHAT)


def test_a_topic_binding_does_not_bind_its_chat() -> None:
    topic = _b("-100300:9")
    only_topic = Bindings([topic])
    assert only_topic.find("telegram", "-100300") is None
    assert only_topic.find("telegram", "-100300", "8") is None
    assert only_topic.classify(_msg("hi", chat_id="-100300"), bot_username=BOT) == Ignore("unbound")
    in_topic = _msg("hi", chat_id="-100300", thread_id="9")
    assert only_topic.classify(in_topic, bot_username=BOT) == Turn("hi", topic)
    assert only_topic.find_channel("telegram", "-100300:9") is not None
    assert only_topic.find_channel("telegram", "-100300") is None


def test_who_may_answer_an_approval() -> None:
    assert Bindings.may_approve(STRICT, "502") and not Bindings.may_approve(STRICT, "501")  # approvers only
    senders = _b("-100301", allowed_senders=["501"])
    assert Bindings.may_approve(senders, "501") and not Bindings.may_approve(senders, "999")
    # neither list: nobody can approve (DESIGN §6, none → deny), so the chat is never asked
    assert not Bindings.may_approve(OPEN, "anyone") and not Bindings.has_approvers(OPEN)
    assert Bindings.has_approvers(senders) and Bindings.has_approvers(STRICT)


def test_bindings_and_verdicts_are_hashable_by_their_chat() -> None:
    same_chat = _b(GROUP, allowed_senders=["1"])
    assert hash(same_chat) == hash(OPEN) and len({OPEN, FORUM_CHAT, FORUM_TOPIC}) == 3
    assert len({Turn("a", OPEN), Turn("a", OPEN), Command("new", STRICT)}) == 2
