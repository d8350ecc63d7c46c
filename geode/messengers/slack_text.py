"""Slack's wire shapes as GEODE's: an envelope's payload normalised to an InboundMessage or a CallbackPress,
and the Block Kit approval buttons."""

from __future__ import annotations

import re
from typing import Any

from geode.messengers import chat_files, kinds
from geode.messengers.model import CallbackPress, InboundMessage, Unhandled, inbound, unhandled

PLATFORM = "slack"
MAX_BUTTON_VALUE = 2_000
MAX_SECTION_TEXT = 3_000
MAX_BUTTON_LABEL = 75
USER_SUBTYPES = {"thread_broadcast", "file_share"}  # subtypes that are still a person's new message
# the Slack names of emoji an ack_reaction may be given as (any other is taken as a name, colons dropped)
_EMOJI_NAMES = {
    "👀": "eyes",
    "👍": "+1",
    "✅": "white_check_mark",
    "⏳": "hourglass_flowing_sand",
    "🤖": "robot_face",
}
_LINK = re.compile(r"<((?:https?|mailto):[^|>]+)(?:\|([^>]*))?>")
_CHANNEL = re.compile(r"<#[A-Z0-9]+\|([^>]*)>")


def slack_to_plain(text: str, *, bot_id: str, bot_name: str) -> str:
    """Slack's encoded text as typed: the bot's ``<@U…>`` as ``@<bot name>`` (so the bindings see and strip
    the mention like on other platforms), ``<#C…|name>`` as ``#name``, links as their URL, ``&amp;`` etc.
    unescaped. Other users' ``<@U…>`` stay."""
    if bot_id and bot_name:
        text = re.sub(rf"<@{re.escape(bot_id)}(?:\|[^>]*)?>", f"@{bot_name}", text)
    text = _CHANNEL.sub(lambda m: f"#{m.group(1)}", text)
    text = _LINK.sub(lambda m: m.group(1) if not m.group(2) else f"{m.group(2)} ({m.group(1)})", text)
    return text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")  # Slack escapes these three


def normalise(
    kind: str, payload: dict[str, Any], *, bot_id: str, bot_bid: str = "", bot_name: str = ""
) -> InboundMessage | CallbackPress | Unhandled | None:
    """One Socket Mode envelope (``kind`` is its type) as GEODE sees it; None for what GEODE ignores: the
    bot's own posts, edits, joins and other subtypes, other event and interaction types."""
    if kind == "events_api" and payload.get("type") == "event_callback":
        return _message(payload.get("event") or {}, bot_id=bot_id, bot_bid=bot_bid, bot_name=bot_name)
    if kind == "interactive" and payload.get("type") == "block_actions":
        return _press(payload)
    return None


def unreadable(kind: str, payload: dict[str, Any]) -> Unhandled | None:
    """An envelope ``normalise`` could not read, as Unhandled when it is a message event (None otherwise)."""
    event = payload.get("event") if kind == "events_api" and isinstance(payload, dict) else None
    if not isinstance(event, dict) or event.get("type") not in ("message", "app_mention"):
        return None
    im = event.get("channel_type") == "im"
    thread = event.get("thread_ts") or ("" if im else event.get("ts"))
    return unhandled(
        "malformed", platform=PLATFORM, chat_id=event.get("channel") or "", thread_id=thread or "",
        message_id=event.get("ts") or "", sender_id=event.get("user") or "",
        from_bot=bool(event.get("bot_id")),
    )  # fmt: skip


def _message(
    event: dict[str, Any], *, bot_id: str, bot_bid: str, bot_name: str
) -> InboundMessage | Unhandled | None:
    kind = event.get("type")
    if kind == "message" and event.get("subtype") == "message_changed":
        return _edited(event, bot_id=bot_id, bot_bid=bot_bid, bot_name=bot_name)
    if kind not in ("message", "app_mention") or event.get("hidden"):
        return None
    if event.get("subtype") and event.get("subtype") not in USER_SUBTYPES:
        return None  # message_changed, message_deleted, channel_join, bot_message, ...
    user, channel = str(event.get("user") or ""), str(event.get("channel") or "")
    ts = str(event.get("ts") or "")
    if not user or not channel or not ts:
        return None
    if user == bot_id or (bot_bid and event.get("bot_id") == bot_bid):
        return None  # this bot's own post
    raw = str(event.get("text") or "")
    im = event.get("channel_type") == "im" or channel.startswith("D")
    mentioned = kind == "app_mention" or (bool(bot_id) and f"<@{bot_id}" in raw) or im
    # A top-level message starts its own thread (the reply goes there, and a follow-up in that thread is
    # the same conversation); a DM stays flat unless the user threads.
    thread = str(event.get("thread_ts") or ("" if im else ts))
    fields: dict[str, Any] = dict(
        platform=PLATFORM,
        chat_id=channel,
        thread_id=thread,
        message_id=ts,  # the same for the message and app_mention events of one message, and on a retry
        sender_id=user,
        text=slack_to_plain(raw, bot_id=bot_id, bot_name=bot_name),
        mentioned=mentioned,
        from_bot=bool(event.get("bot_id")),
    )
    fields["attachments"] = chat_files.slack_attachments(event)  # saved by geode/messengers/inbox.py
    kind = "" if raw.strip() else chat_files.slack_kind(event)
    if kind and (not kinds.handles(PLATFORM, kind) or not fields["attachments"]):  # none readable: a notice
        return unhandled("unsupported", kind=kind, **fields)  # an audio clip without text
    return inbound(**fields)


def _edited(
    event: dict[str, Any], *, bot_id: str, bot_bid: str, bot_name: str
) -> InboundMessage | Unhandled | None:
    """A ``message_changed`` event: the edited message (``edited``, its version the edit's ts); None for a
    change that is no edit (a link unfurled) and for the bot's own edits."""
    inner = event.get("message")
    if not isinstance(inner, dict) or not isinstance(inner.get("edited"), dict):
        return None
    merged = {k: v for k, v in inner.items() if k not in ("subtype", "hidden")}
    merged.update(type="message", channel=event.get("channel"), channel_type=event.get("channel_type"))
    item = _message(merged, bot_id=bot_id, bot_bid=bot_bid, bot_name=bot_name)
    if item is None:
        return None
    version = str(inner["edited"].get("ts") or event.get("ts") or "")
    if isinstance(item, InboundMessage):
        return item.model_copy(update={"edited": True, "edit_version": version})
    return item.model_copy(update={"edited": True})


def _press(payload: dict[str, Any]) -> CallbackPress | None:
    actions = payload.get("actions") or []
    user = str((payload.get("user") or {}).get("id") or "")
    container = payload.get("container") or {}
    message = payload.get("message") or {}
    channel = str((payload.get("channel") or {}).get("id") or container.get("channel_id") or "")
    message_ts = str(container.get("message_ts") or message.get("ts") or "")
    if not actions or not user or not channel:
        return None
    thread = str(container.get("thread_ts") or message.get("thread_ts") or "")
    return CallbackPress(
        platform=PLATFORM,
        chat_id=channel,
        thread_id=thread,
        message_id=message_ts,
        sender_id=user,
        callback_id=f"{channel}|{user}|{thread}",  # answer_press posts an ephemeral note there
        data=str(actions[0].get("value") or ""),
    )


def approval_blocks(text: str, buttons: list[tuple[str, str]]) -> list[dict[str, Any]]:
    """A section with ``text`` (cut at Slack's 3,000) and an actions block of one button per
    ``(label, value)``; action ids are unique in the message."""
    section = text if len(text) <= MAX_SECTION_TEXT else text[: MAX_SECTION_TEXT - 1] + "…"
    elements = [
        {
            "type": "button",
            "text": {"type": "plain_text", "text": label[:MAX_BUTTON_LABEL] or "?", "emoji": False},
            "action_id": f"geode_button_{i}",
            "value": value,
        }
        for i, (label, value) in enumerate(buttons)
    ]
    return [
        {"type": "section", "text": {"type": "mrkdwn", "text": section or " "}},
        {"type": "actions", "block_id": "geode_approval", "elements": elements},
    ]


def reaction_name(emoji: str) -> str:
    """An ack reaction as ``reactions.add`` names it: ``"👀"`` → ``"eyes"``, ``":eyes:"`` → ``"eyes"``."""
    return _EMOJI_NAMES.get(emoji, emoji.strip(":"))
