"""What a Discord message carries besides text, and its edits: the kind of a message without text (a sticker,
an attachment) that GEODE does not handle (answered "not supported", geode/messengers/notices.py), and a
MESSAGE_UPDATE that is a user's edit, queued as an edited message (re-run when the binding says
``on_edit = "rerun"``; its version is the edit's ``edited_timestamp``)."""

from __future__ import annotations

import asyncio
from collections import deque
from typing import Any, Protocol

import discord

from geode.messengers import kinds
from geode.messengers.model import InboundMessage, Item, Unhandled


class Inbox(Protocol):
    """What an edit is queued through (the Discord translator)."""

    bot_id: str
    _inbox: deque[tuple[str, Item, Any]]
    _arrived: asyncio.Event

    def _delivery_id(self) -> str: ...
    def _item(self, message: discord.Message) -> InboundMessage | Unhandled | None: ...


def kind_of(message: Any) -> str:
    """The kind of a message without text: ``sticker``, ``photo`` (an image attachment), ``voice`` (a voice
    message), ``file`` (any other attachment); "" when it carries none of them."""
    if getattr(message, "stickers", None):
        return kinds.STICKER
    attachments = getattr(message, "attachments", None) or []
    if not attachments:
        return ""
    flags = getattr(message, "flags", None)
    if flags is not None and getattr(flags, "voice", False):
        return kinds.VOICE
    content_type = str(getattr(attachments[0], "content_type", "") or "")
    return kinds.PHOTO if content_type.startswith("image/") else kinds.FILE


def unsupported(platform: str, message: Any) -> str:
    """The kind to answer "not supported" for (a message without text of a kind not handled), else ""."""
    kind = "" if getattr(message, "content", "") else kind_of(message)
    return kind if kind and not kinds.handles(platform, kind) else ""


def on_edit(inbox: Inbox, raw: discord.RawMessageUpdateEvent) -> None:
    """A MESSAGE_UPDATE: queued as an edited message when it is a person's edit (``edited_timestamp`` set;
    an embed appearing is no edit); the bot's own edits and anything unreadable are left out."""
    message = raw.message
    edited_at = message.edited_at
    if edited_at is None or (inbox.bot_id and message.author.id == int(inbox.bot_id)):
        return
    item = inbox._item(message)
    version = str(int(edited_at.timestamp() * 1000))
    if isinstance(item, InboundMessage):
        item = item.model_copy(update={"edited": True, "edit_version": version})
    elif isinstance(item, Unhandled):
        item = item.model_copy(update={"edited": True})
    else:
        return
    inbox._inbox.append((inbox._delivery_id(), item, None))  # an edit moves no channel position
    inbox._arrived.set()
