"""The once-per-chat-per-kind-per-hour claim of a "not supported" answer (geode/messengers/notices.py, on an
injected clock) and the translators' shapes for it: a Slack file without text and a Slack edit
(``message_changed``), a Telegram sticker through the real python-telegram-bot against the local server."""

from __future__ import annotations

from typing import Any

from geode.messengers.journal import PollerState
from geode.messengers.model import InboundMessage, Unhandled
from geode.messengers.notices import claim_notice
from geode.messengers.slack_text import normalise, reaction_name
from geode.messengers.telegram import TelegramTranslator
from geode.testing.bot_api_server import LocalBotApi
from tests.messengers.poller_fakes import FakeStore

HOUR = 3600.0


def _state(store: FakeStore) -> PollerState:
    return PollerState(store, "telegram", "1")


def test_one_claim_per_chat_and_kind_per_hour_stored_before_any_reply() -> None:
    store = FakeStore()
    state = _state(store)
    assert claim_notice(state, "-100", "sticker", "1", now=1000.0)
    assert store.set_calls == [("notice:-100:sticker", "1000.000:1")]  # stored: a restart sees it
    assert not claim_notice(_state(store), "-100", "sticker", "2", now=1000.0 + HOUR - 1)  # a new incarnation
    assert claim_notice(state, "-100", "voice", "3", now=1001.0)  # another kind
    assert claim_notice(state, "-200", "sticker", "4", now=1001.0)  # another chat
    assert claim_notice(state, "-100", "sticker", "1", now=1500.0)  # the holder, redelivered: asks again
    assert claim_notice(state, "-100", "sticker", "5", now=1000.0 + HOUR)  # an hour later: answered again
    assert not claim_notice(state, "-100", "sticker", "6", now=1000.0 + HOUR + 1)


def test_a_garbled_claim_counts_as_none() -> None:
    store = FakeStore()
    store.set_cursor("telegram", "1", "notice:-100:sticker", "not-a-time:9")
    assert claim_notice(_state(store), "-100", "sticker", "1", now=5.0)


def _slack(event: dict[str, Any]) -> InboundMessage | Unhandled | None:
    payload = {"type": "event_callback", "event": event}
    item = normalise("events_api", payload, bot_id="UBOT", bot_name="geode")
    assert not isinstance(item, dict)
    return item  # type: ignore[return-value]


def test_slack_audio_clip_is_a_voice_note_and_a_file_a_message_with_its_attachment() -> None:
    base = {"type": "message", "subtype": "file_share", "channel": "C1", "user": "U1", "ts": "1.0"}
    clip_url = "https://files.slack.com/files-pri/T1-F1/audio_message.webm"
    clip = {"id": "F1", "subtype": "slack_audio", "name": "audio_message.webm", "mimetype": "audio/webm",
            "size": 7, "url_private_download": clip_url}  # fmt: skip
    item = _slack({**base, "text": "", "files": [clip]})
    assert isinstance(item, InboundMessage) and item.text == ""  # transcribed, or "not enabled" (inbox.py)
    (att,) = item.attachments
    assert (att.kind, att.file_id, att.media_type, att.size) == ("voice", clip_url, "audio/webm", 7)
    url = "https://files.slack.com/files-pri/T1-F2/a.pdf"
    pdf = {"id": "F2", "name": "a.pdf", "mimetype": "application/pdf", "size": 9, "url_private": url}
    item = _slack({**base, "text": "", "files": [pdf]})
    assert isinstance(item, InboundMessage) and item.text == ""
    (att,) = item.attachments
    assert (att.kind, att.file_id, att.file_name, att.media_type, att.size) == (
        "document",
        url,
        "a.pdf",
        "application/pdf",
        9,
    )


def test_slack_message_changed_is_an_edit_with_its_version_and_an_unfurl_or_own_edit_is_nothing() -> None:
    inner = {
        "type": "message",
        "user": "U1",
        "text": "new",
        "ts": "1.0",
        "edited": {"user": "U1", "ts": "2.0"},
    }
    event = {"type": "message", "subtype": "message_changed", "hidden": True, "channel": "C1", "ts": "2.0",
             "message": inner, "previous_message": {**inner, "text": "old"}}  # fmt: skip
    item = _slack(event)
    assert isinstance(item, InboundMessage)
    assert (item.text, item.edited, item.edit_version, item.message_id) == ("new", True, "2.0", "1.0")
    assert item.turn_message_id == "1.0.edit-2.0"
    unfurl = {k: v for k, v in inner.items() if k != "edited"}
    assert _slack({**event, "message": unfurl}) is None
    assert _slack({**event, "message": {**inner, "user": "UBOT"}}) is None
    assert reaction_name("👀") == "eyes" and reaction_name(":tada:") == "tada"


async def test_a_telegram_sticker_is_unsupported_and_an_edit_carries_its_edit_date() -> None:
    with LocalBotApi() as api:
        tr = TelegramTranslator(api.token, base_url=api.base_url, poll_timeout_s=0)
        try:
            await tr.start()
            api.push_sticker(-100, sender_id=7)
            sent = api.push_message(-100, "hello", sender_id=7)
            mid = sent["message"]["message_id"]
            edit = api.push_message(-100, "hello again", sender_id=7, message_id=mid, edited=True)
            items = [item for _, item in (await tr.poll(None)).items]
        finally:
            await tr.close()
    sticker, message, edited = items
    assert isinstance(sticker, Unhandled) and (sticker.reason, sticker.kind) == ("unsupported", "sticker")
    assert isinstance(message, InboundMessage) and not message.edited and message.edit_version == ""
    assert isinstance(edited, InboundMessage) and edited.edited
    assert edited.edit_version == str(edit["edited_message"]["edit_date"])
