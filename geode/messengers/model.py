"""The platform-neutral shapes a translator normalises inbound updates into: a message or a button press,
and one poll's batch of them."""

from __future__ import annotations

from dataclasses import dataclass, field

from pydantic import BaseModel, Field

MAX_ID = 256  # chat, thread, message, sender and callback ids
MAX_TEXT = 64 * 1024


def channel_key_of(chat_id: str, thread_id: str = "") -> str:
    """``"<chat_id>"``, or ``"<chat_id>:<thread_id>"`` for a topic/thread."""
    return f"{chat_id}:{thread_id}" if thread_id else chat_id


class InboundMessage(BaseModel):
    """One chat message as GEODE sees it, whatever the platform."""

    platform: str = Field(min_length=1, max_length=32)
    chat_id: str = Field(min_length=1, max_length=MAX_ID)
    thread_id: str = Field(default="", max_length=MAX_ID)
    message_id: str = Field(min_length=1, max_length=MAX_ID)
    sender_id: str = Field(max_length=MAX_ID)
    sender_name: str = Field(default="", max_length=MAX_ID)
    text: str = Field(max_length=MAX_TEXT)
    mentioned: bool = False  # the bot was @-mentioned, or the message replies to the bot
    from_bot: bool = False  # sent by a bot (this one or another)
    edited: bool = False

    @property
    def channel_key(self) -> str:
        return channel_key_of(self.chat_id, self.thread_id)


class CallbackPress(BaseModel):
    """A press on an inline-keyboard button (an approval answer)."""

    platform: str = Field(min_length=1, max_length=32)
    chat_id: str = Field(min_length=1, max_length=MAX_ID)
    thread_id: str = Field(default="", max_length=MAX_ID)
    message_id: str = Field(max_length=MAX_ID)  # the message that carries the keyboard
    sender_id: str = Field(max_length=MAX_ID)
    callback_id: str = Field(min_length=1, max_length=MAX_ID)
    data: str = Field(max_length=MAX_ID)

    @property
    def channel_key(self) -> str:
        return channel_key_of(self.chat_id, self.thread_id)


Item = InboundMessage | CallbackPress | None


@dataclass
class Batch:
    """One poll of a platform: ``items`` are ``(delivery id, normalised item or None)`` in arrival order (the
    delivery id is the Telegram update id, the Slack envelope id, the Discord ``session:sequence``; None for
    kinds GEODE ignores). ``next_cursor`` is what the poller stores once every item's turn is recorded
    (Telegram: the next ``offset``); None: nothing to store (push platforms). The poller then calls the
    translator's ``confirm(batch)`` (Slack acks the envelopes there)."""

    items: list[tuple[str, Item]] = field(default_factory=list)
    next_cursor: str | None = None
