"""The platform-neutral shapes a translator normalises inbound updates into: a message or a button press,
and one poll's batch of them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError

MAX_ID = 256  # chat, thread, message, sender and callback ids
MAX_TEXT = 64 * 1024


def channel_key_of(chat_id: str, thread_id: str = "") -> str:
    """``"<chat_id>"``, or ``"<chat_id>:<thread_id>"`` for a topic/thread."""
    return f"{chat_id}:{thread_id}" if thread_id else chat_id


class Attachment(BaseModel):
    """A file sent with a message, as the platform names it (not fetched yet): geode/messengers/inbox.py
    checks its size and type against ``[messengers]`` and saves it under the chat's workspace."""

    kind: Literal["photo", "document", "voice"]  # voice: a voice note or audio clip, transcribed
    file_id: str = Field(min_length=1, max_length=2_048)  # Telegram file id; Slack/Discord file URL
    file_name: str = Field(default="", max_length=MAX_ID)  # as the sender named it: never trusted as a path
    media_type: str = Field(default="", max_length=MAX_ID)
    size: int = Field(default=0, ge=0)  # as the platform declares it (0: not declared)


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
    edit_version: str = Field(default="", max_length=MAX_ID)  # an edit's version (Telegram edit_date, ...)
    attachments: tuple[Attachment, ...] = ()  # a photo or files sent with it

    @property
    def channel_key(self) -> str:
        return channel_key_of(self.chat_id, self.thread_id)

    @property
    def turn_message_id(self) -> str:
        """The id its turn is keyed by: the message id, or for an edit re-run ``<id>.edit-<version>``."""
        return f"{self.message_id}.edit-{self.edit_version or '0'}" if self.edited else self.message_id


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


# Why a message cannot be handled; "unsupported" is a message kind GEODE does not handle (its ``kind``).
UnhandledReason = Literal["too_long", "bad_text", "malformed", "unsupported"]
UNHANDLED_REPLIES: dict[str, str] = {
    "too_long": f"Sorry, that message is too long for me (over {MAX_TEXT:,} characters); it was not read.",
    "bad_text": "Sorry, that message has text I cannot read (not valid Unicode); it was not read.",
    "malformed": "Sorry, I could not read that message; it was not handled.",
}


class Unhandled(BaseModel):
    """A chat message GEODE does not handle (too long, text that is not valid Unicode, a shape the translator
    could not read): the poller counts it by ``reason``, answers an allowed sender in a bound chat once with
    a short error, and skips it (its cursor or ack goes on). Ids are cleaned so this always builds."""

    platform: str = Field(min_length=1, max_length=32)
    chat_id: str = Field(max_length=MAX_ID)
    thread_id: str = Field(default="", max_length=MAX_ID)
    message_id: str = Field(max_length=MAX_ID)
    sender_id: str = Field(max_length=MAX_ID)
    reason: UnhandledReason
    kind: str = Field(default="", max_length=32)  # with reason "unsupported": sticker, photo, voice, ...
    mentioned: bool = False
    from_bot: bool = False
    edited: bool = False

    @property
    def channel_key(self) -> str:
        return channel_key_of(self.chat_id, self.thread_id)

    @property
    def label(self) -> str:
        """What it is counted as: the reason, or ``unsupported.<kind>``."""
        return f"unsupported.{self.kind}" if self.reason == "unsupported" else self.reason

    @property
    def reply_text(self) -> str:
        if self.reason == "unsupported" and self.kind == "voice":  # [messengers] transcription unset
            return "Sorry, voice notes are not enabled on this bot; please send text."
        if self.reason == "unsupported":
            return f"Sorry, I can't handle {self.kind or 'that kind of'} messages yet; please send text."
        return UNHANDLED_REPLIES[self.reason]


def clean_text(value: object, limit: int = MAX_ID) -> str:
    """``value`` as printable-safe UTF-8 text of at most ``limit`` characters (lone surrogates replaced)."""
    text = value if isinstance(value, str) else str(value)
    return text[:limit].encode("utf-8", "replace").decode("utf-8")


def text_problem(text: str) -> UnhandledReason | None:
    """Why a message's text cannot be handled, or None."""
    if len(text) > MAX_TEXT:
        return "too_long"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "bad_text"
    return None


def inbound(**fields: Any) -> InboundMessage | Unhandled:
    """The translators' one way to build a message: an :class:`InboundMessage`, or :class:`Unhandled` when
    its text is too long or not valid Unicode, or any field is out of bounds (``malformed``). Never raises."""
    fields["sender_name"] = clean_text(fields.get("sender_name", ""))
    reason = text_problem(str(fields.get("text", "")))
    if reason is None:
        try:
            return InboundMessage(**fields)
        except ValidationError:
            reason = "malformed"
    return unhandled(reason, **fields)


def unhandled(reason: UnhandledReason, **fields: Any) -> Unhandled:
    """An :class:`Unhandled` of whatever ids ``fields`` carry (missing ones empty)."""
    ids = {k: clean_text(fields.get(k, "")) for k in ("chat_id", "thread_id", "message_id", "sender_id")}
    flags = {k: bool(fields.get(k, False)) for k in ("mentioned", "from_bot", "edited")}
    kind = clean_text(fields.get("kind", ""), 32)
    platform = clean_text(fields.get("platform") or "?", 32)
    return Unhandled(platform=platform, reason=reason, kind=kind, **ids, **flags)


Item = InboundMessage | CallbackPress | Unhandled | None


@dataclass
class Batch:
    """One poll of a platform: ``items`` are ``(delivery id, normalised item or None)`` in arrival order (the
    delivery id is the Telegram update id, the Slack envelope id, the Discord ``session:sequence``; None for
    kinds GEODE ignores, :class:`Unhandled` for messages it cannot handle). ``next_cursor`` is what the poller
    stores once every item's turn is recorded
    (Telegram: the next ``offset``); None: nothing to store (push platforms). The poller then calls the
    translator's ``confirm(batch)`` (Slack acks the envelopes there)."""

    items: list[tuple[str, Item]] = field(default_factory=list)
    next_cursor: str | None = None
    # per channel, stored like ``next_cursor`` (Discord: each bound channel's newest message id in the batch,
    # which a new gateway session reads history after)
    positions: dict[str, str] = field(default_factory=dict)
