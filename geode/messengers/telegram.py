"""The Telegram translator: python-telegram-bot's ``telegram.Bot`` (no ``Application``) behind GEODE's
platform-neutral shapes (InboundMessage, CallbackPress) and errors (geode/messengers/errors.py)."""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Awaitable
from pathlib import Path
from typing import Any, TypeVar

from telegram import (
    Bot,
    CallbackQuery,
    InlineKeyboardButton,
    InlineKeyboardMarkup,
    InputFile,
    Message,
    ReplyParameters,
    Update,
)
from telegram import error as tg
from telegram.constants import ChatAction, MessageEntityType, ParseMode
from telegram.request import HTTPXRequest

from geode.messengers import kinds
from geode.messengers.errors import Conflict, NotPosted, PlatformError, RateLimited, Rejected
from geode.messengers.model import (
    Attachment,
    Batch,
    CallbackPress,
    InboundMessage,
    Unhandled,
    inbound,
    unhandled,
)
from geode.messengers.replies import split_reply
from geode.messengers.telegram_files import (
    SavedFile,
    TooLarge,
    attachments_of,
    download,
    file_base_url,
    file_url,
)

PLATFORM = "telegram"
READ_SLACK_S = 10.0  # a long poll's read timeout is its `timeout` plus this
MAX_CALLBACK_DATA = 64  # bytes, Telegram's limit
_UPDATES = ["message", "edited_message", "callback_query"]
T = TypeVar("T")
log = logging.getLogger(__name__)


class _RedactToken(logging.Filter):
    """httpx logs each request URL at INFO, and the Bot API puts the token in the URL."""

    def __init__(self, token: str) -> None:
        super().__init__()
        self._token = token

    def filter(self, record: logging.LogRecord) -> bool:
        text = record.getMessage()
        if self._token in text:
            record.msg, record.args = text.replace(self._token, "<token>"), ()
        return True


class TelegramTranslator:
    """One bot account: long-poll updates, normalise them, post replies, typing, inline-keyboard approvals."""

    platform = PLATFORM

    def __init__(self, token: str, *, base_url: str, poll_timeout_s: float) -> None:
        # PTB 22 warns on every int-valued time period it builds (RetryAfter among them) unless opted in to
        # timedelta values, the next major version's behaviour: opt in, so a 429 is not a warning.
        os.environ.setdefault("PTB_TIMEDELTA", "true")
        self._token, self._base_url = token, base_url
        self._poll_timeout_s = max(0.0, float(poll_timeout_s))
        self._bot = Bot(
            token,
            base_url=base_url,
            base_file_url=file_base_url(base_url),  # downloads go to the configured host, never another
            request=HTTPXRequest(connection_pool_size=4, connect_timeout=5.0, read_timeout=15.0),
            get_updates_request=HTTPXRequest(
                connection_pool_size=1, connect_timeout=5.0, read_timeout=self._poll_timeout_s + READ_SLACK_S
            ),
        )
        self._redact = _RedactToken(token)
        logging.getLogger("httpx").addFilter(self._redact)
        self.bot_id = 0
        self.username = ""

    async def start(self) -> str:
        """getMe (checks the token) and deleteWebhook (getUpdates answers 409 while one is set). Again after
        ``close()`` is fine."""
        logging.getLogger("httpx").addFilter(self._redact)  # no-op when already there
        await self._call(self._bot.initialize())
        self.bot_id, self.username = self._bot.id, self._bot.username
        await self._call(self._bot.delete_webhook())
        return self.username

    async def poll(self, cursor: str | int | None = None) -> Batch:
        """One long poll. ``cursor`` (the offset) confirms every update before it to Telegram; the batch's
        ``next_cursor`` is the offset after its last update (None when nothing came)."""
        offset = int(cursor) if cursor is not None and str(cursor).strip() else None
        updates = await self._call(
            self._bot.get_updates(
                offset=offset,
                timeout=math.ceil(self._poll_timeout_s),
                read_timeout=READ_SLACK_S,
                allowed_updates=_UPDATES,
            )
        )
        fresh = [u for u in updates if offset is None or u.update_id >= offset]
        items = [(str(u.update_id), self._item(u)) for u in fresh]
        last = max((u.update_id for u in fresh), default=None)
        return Batch(items, None if last is None else str(last + 1))

    async def confirm(self, batch: Batch) -> None:
        """Nothing to do: the next poll's ``offset`` confirms the batch to Telegram."""

    def _item(self, update: Update) -> InboundMessage | CallbackPress | Unhandled | None:
        """``normalise``, never raising: an update it cannot read is Unhandled (the poller skips it)."""
        try:
            return self.normalise(update)
        except Exception as exc:
            log.warning("telegram update %s not understood (%s)", update.update_id, type(exc).__name__)
            msg = update.message or update.edited_message
            chat = msg.chat.id if msg is not None else ""
            sender = msg.from_user.id if msg is not None and msg.from_user is not None else ""
            mid = msg.message_id if msg is not None else ""
            return unhandled("malformed", platform=PLATFORM, chat_id=chat, message_id=mid, sender_id=sender)

    def normalise(self, update: Update) -> InboundMessage | CallbackPress | Unhandled | None:
        if update.callback_query is not None:
            return self._press(update.callback_query)
        msg = update.message or update.edited_message
        if msg is None or msg.from_user is None:
            return None
        sender = msg.from_user
        fields: dict[str, Any] = dict(
            platform=PLATFORM,
            chat_id=str(msg.chat.id),
            thread_id=_thread(msg),
            message_id=str(msg.message_id),
            sender_id=str(sender.id),
            sender_name=sender.username or sender.full_name,
            text=msg.text or msg.caption or "",
            mentioned=self._mentions_readable(msg),
            from_bot=sender.is_bot,
            edited=update.edited_message is not None,
            edit_version=_edit_version(msg),
            attachments=attachments_of(msg),  # a photo, a document: saved by geode/messengers/inbox.py
        )
        kind = "" if fields["text"] else kinds.telegram_kind(msg)
        if kind and not kinds.handles(PLATFORM, kind):
            return unhandled("unsupported", kind=kind, **fields)
        return inbound(**fields)

    async def fetch_file(self, att: Attachment, dest: Path, max_bytes: int) -> SavedFile:
        """getFile, then download the file from the configured Bot API host into ``dest`` (the URL is
        checked before the token goes in: telegram_files.file_url)."""
        got = await self._call(self._bot.get_file(att.file_id))
        prefix = f"{file_base_url(self._base_url)}{self._token}/"
        raw = (got.file_path or "").removeprefix(prefix)
        if got.file_size and got.file_size > max_bytes:
            raise TooLarge(f"the file is larger than {max_bytes:,} bytes")
        url = file_url(self._base_url, raw, self._token)
        return await download(url, dest, max_bytes, token=self._token)

    async def react(self, channel_key: str, message_id: str, emoji: str) -> None:
        """The ack reaction on a received message (setMessageReaction)."""
        chat_id, _ = _channel(channel_key)
        await self._call(self._bot.set_message_reaction(chat_id, int(message_id), emoji))

    async def send_text(self, channel_key: str, text: str, *, reply_to: str = "") -> list[str]:
        """Post ``text`` split on line boundaries (Telegram's 4,096 limit), as Markdown; a part Telegram
        cannot parse is sent again as plain text. Returns the posted message ids."""
        chat_id, thread_id = _channel(channel_key)
        ids: list[str] = []
        for part in split_reply(text):
            first = not ids and reply_to.isdigit()  # only the first part replies to the message
            reply = ReplyParameters(int(reply_to), allow_sending_without_reply=True) if first else None
            try:
                sent = await self._send(chat_id, thread_id, part, reply, ParseMode.MARKDOWN)
            except Rejected as exc:
                if "can't parse entities" not in str(exc).lower():
                    raise
                sent = await self._send(chat_id, thread_id, part, reply, None)
            ids.append(str(sent.message_id))
        return ids

    async def send_file(
        self, channel_key: str, filename: str, data: bytes, *, caption: str = ""
    ) -> list[str]:
        """Post ``data`` as a document named ``filename`` (sendDocument, multipart); its message id."""
        chat_id, thread_id = _channel(channel_key)
        doc = InputFile(data, filename=filename, attach=True)
        sent = await self._call(
            self._bot.send_document(chat_id, doc, caption=caption or None, message_thread_id=thread_id)
        )
        return [str(sent.message_id)]

    async def typing(self, channel_key: str) -> None:
        chat_id, thread_id = _channel(channel_key)
        await self._call(self._bot.send_chat_action(chat_id, ChatAction.TYPING, message_thread_id=thread_id))

    async def ask_approval(self, channel_key: str, text: str, buttons: list[tuple[str, str]]) -> str:
        """Post ``text`` (plain: it quotes tool arguments) with one inline button per ``(label, data)``."""
        for _, data in buttons:
            if not 1 <= len(data.encode()) <= MAX_CALLBACK_DATA:
                raise ValueError(f"callback data must be 1..{MAX_CALLBACK_DATA} bytes: {data!r}")
        markup = InlineKeyboardMarkup(
            [[InlineKeyboardButton(label, callback_data=data)] for label, data in buttons]
        )
        chat_id, thread_id = _channel(channel_key)
        sent = await self._call(
            self._bot.send_message(chat_id, text, message_thread_id=thread_id, reply_markup=markup)
        )
        return str(sent.message_id)

    async def answer_press(self, callback_id: str, text: str = "") -> None:
        await self._call(self._bot.answer_callback_query(callback_id, text=text or None))

    async def edit_text(self, channel_key: str, message_id: str, text: str) -> None:
        """Replace a message's text (and drop its keyboard). Editing to the same text is not an error."""
        chat_id, _ = _channel(channel_key)
        try:
            await self._call(self._bot.edit_message_text(text, chat_id=chat_id, message_id=int(message_id)))
        except Rejected as exc:
            if "message is not modified" not in str(exc).lower():
                raise

    async def send_status(self, channel_key: str, text: str, *, reply_to: str = "") -> str:
        """A live-progress message with notifications off (``disable_notification``) in the turn's topic; its
        message id. Not a reply to ``reply_to``: the final answer is the reply."""
        chat_id, thread_id = _channel(channel_key)
        send = self._bot.send_message(chat_id, text, message_thread_id=thread_id, disable_notification=True)
        return str((await self._call(send)).message_id)

    async def delete(self, channel_key: str, message_id: str) -> None:
        """Delete one of the bot's messages (deleteMessage); one already gone is fine."""
        chat_id, _ = _channel(channel_key)
        try:
            await self._call(self._bot.delete_message(chat_id, int(message_id)))
        except Rejected as exc:
            if "not found" not in str(exc).lower():
                raise

    async def close(self) -> None:
        try:
            await self._bot.shutdown()
        finally:
            logging.getLogger("httpx").removeFilter(self._redact)

    # -- internals ---------------------------------------------------------------------------------------
    async def _send(
        self, chat_id: int, thread_id: int | None, text: str, reply: ReplyParameters | None, mode: str | None
    ) -> Message:
        return await self._call(
            self._bot.send_message(
                chat_id, text, parse_mode=mode, message_thread_id=thread_id, reply_parameters=reply
            )
        )

    def _mentions_readable(self, msg: Message) -> bool:
        """``_mentions_me``; False when the text cannot be read (a lone surrogate has no UTF-16 offsets)."""
        try:
            return self._mentions_me(msg)
        except UnicodeError:
            return False

    def _mentions_me(self, msg: Message) -> bool:
        me = f"@{self.username}".lower()
        for entity, value in msg.parse_entities(
            [MessageEntityType.MENTION, MessageEntityType.TEXT_MENTION]
        ).items():
            if value.lower() == me or (entity.user is not None and entity.user.id == self.bot_id):
                return True
        replied = msg.reply_to_message
        if replied is None or replied.from_user is None:
            return False
        topic_root = msg.is_topic_message and replied.message_id == msg.message_thread_id
        return replied.from_user.id == self.bot_id and not topic_root

    def _press(self, query: CallbackQuery) -> CallbackPress | None:
        msg = query.message
        if msg is None:  # a button under an inline-mode message: GEODE never sends those
            return None
        return CallbackPress(
            platform=PLATFORM,
            chat_id=str(msg.chat.id),
            thread_id=_thread(msg) if isinstance(msg, Message) else "",
            message_id=str(msg.message_id),
            sender_id=str(query.from_user.id),
            callback_id=query.id,
            data=query.data or "",
        )

    async def _call(self, call: Awaitable[T]) -> T:
        try:
            return await call
        except tg.RetryAfter as exc:
            raise RateLimited(self._clean(exc), retry_after_s=_seconds(exc.retry_after)) from None
        except tg.Conflict as exc:
            raise Conflict(self._clean(exc)) from None
        except (tg.BadRequest, tg.Forbidden, tg.ChatMigrated) as exc:
            raise Rejected(self._clean(exc)) from None
        except tg.InvalidToken:
            raise PlatformError("the bot token was rejected (401/404)", retryable=False) from None
        except tg.NetworkError as exc:  # a 5xx answer, no connection (not posted), or a timeout (maybe)
            raise _network(self._clean(exc), str(exc), isinstance(exc, tg.TimedOut)) from None
        except tg.TelegramError as exc:
            raise PlatformError(self._clean(exc), retryable=True) from None

    def _clean(self, exc: Exception) -> str:
        return f"{type(exc).__name__}: {exc}".replace(self._token, "<token>")


def _thread(msg: Message) -> str:
    return str(msg.message_thread_id) if msg.is_topic_message and msg.message_thread_id else ""


def _channel(channel_key: str) -> tuple[int, int | None]:
    """``"<chat_id>"`` or ``"<chat_id>:<thread_id>"`` → the ints the Bot API takes."""
    chat, _, thread = channel_key.partition(":")
    try:
        return int(chat), int(thread) if thread else None
    except ValueError:
        raise Rejected(f"not a Telegram channel key: {channel_key!r}") from None


def _seconds(value: Any) -> float:
    return float(value.total_seconds()) if hasattr(value, "total_seconds") else float(value)


def _edit_version(msg: Message) -> str:
    """An edited message's version: its ``edit_date`` in unix seconds ("" for a message never edited)."""
    when = msg.edit_date
    return str(int(when.timestamp())) if when is not None else ""


def _network(message: str, text: str, timed_out: bool) -> PlatformError:
    """python-telegram-bot's NetworkError as known not posted (a 5xx answer: the server's description; a
    connection never made; a pool timeout: "not sent") or maybe posted (a timeout or a connection lost
    mid-request)."""
    if timed_out:
        return NotPosted(message) if "*not* sent" in text else PlatformError(message, retryable=True)
    httpx_failure = text.startswith("httpx.") or text.startswith("Unknown error in HTTP")
    if not httpx_failure or text.startswith("httpx.ConnectError"):
        return NotPosted(message)
    return PlatformError(message, retryable=True)
