"""The Bot API methods of the local server (bot_api_server.py): each takes the server and the request's
string params and returns the ``result`` or raises ``ApiError`` with Telegram's description."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from geode.testing import bot_api_wire as wire
from geode.testing.bot_api_wire import JSON

MAX_TEXT = 4096
MAX_POLL_S = 50.0
POLL_CONFLICT = (
    "Conflict: terminated by other getUpdates request; make sure that only one bot instance is running"
)
WEBHOOK_CONFLICT = (
    "Conflict: can't use getUpdates method while webhook is active; "
    "use deleteWebhook to delete the webhook first"
)
NOT_MODIFIED = (
    "Bad Request: message is not modified: specified new message content and reply markup are exactly "
    "the same as a current content and reply markup of the message"
)


class ApiError(Exception):
    """An error envelope: ``{"ok": false, "error_code", "description", "parameters"?}``."""

    def __init__(self, status: int, description: str, *, retry_after: int | None = None) -> None:
        super().__init__(description)
        self.status, self.description, self.retry_after = status, description, retry_after

    def envelope(self) -> JSON:
        body: JSON = {"ok": False, "error_code": self.status, "description": self.description}
        if self.retry_after is not None:
            body["parameters"] = {"retry_after": self.retry_after}
        return body


@dataclass
class Poll:
    event: asyncio.Event = field(default_factory=asyncio.Event)
    terminated: bool = False


class BotApi(Protocol):
    """What a Bot API method reads and changes of the fake (``bot_api_server.LocalBotApi`` is one); a method
    takes the fake's lock itself where it needs it."""

    bot_id: int
    bot_user: JSON
    _lock: threading.Lock
    _updates: list[JSON]
    _messages: dict[tuple[int, int], JSON]
    _posts: list[tuple[int, int, str | None]]
    _deleted: set[tuple[int, int]]
    _actions: list[JSON]
    _reactions: list[JSON]
    _callbacks: dict[str, bool]
    _webhook: str
    _poll: Poll | None
    _closing: bool
    files: Any  # bot_api_files.FileStore

    def _message_id(self, chat_id: int, wanted: int | None = None) -> int: ...


def _error(status: int, description: str) -> ApiError:
    return ApiError(status, description)


async def get_updates(api: BotApi, p: JSON) -> list[JSON]:
    """Long poll: confirm updates before ``offset``, answer at once when some are pending, else wait up to
    ``timeout`` s for one. A newer getUpdates terminates the waiting one with 409, as Telegram does."""
    if api._webhook:
        raise _error(409, WEBHOOK_CONFLICT)
    offset = _int(p, "offset", required=False)
    limit = min(max(_int(p, "limit", required=False) or 100, 1), 100)
    timeout = min(max(float(p.get("timeout") or 0), 0.0), MAX_POLL_S)
    with api._lock:
        if offset is not None and offset < 0:
            api._updates = api._updates[offset:]
        elif offset:
            api._updates = [u for u in api._updates if int(u["update_id"]) >= offset]
    poll, previous = Poll(), api._poll
    api._poll = poll
    if previous is not None:
        previous.terminated = True
        previous.event.set()
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    try:
        while True:
            poll.event.clear()
            if poll.terminated:
                raise _error(409, POLL_CONFLICT)
            with api._lock:
                batch = api._updates[:limit]
            remaining = deadline - loop.time()
            if batch or remaining <= 0 or api._closing:
                return batch
            try:
                await asyncio.wait_for(poll.event.wait(), remaining)
            except TimeoutError:
                pass
    finally:
        if api._poll is poll:
            api._poll = None


def get_me(api: BotApi, p: JSON) -> JSON:
    return {
        **api.bot_user, "can_join_groups": True, "can_read_all_group_messages": False,
        "supports_inline_queries": False, "can_connect_to_business": False, "has_main_web_app": False,
    }  # fmt: skip


def set_webhook(api: BotApi, p: JSON) -> bool:
    api._webhook = str(p.get("url") or "")
    return True


def delete_webhook(api: BotApi, p: JSON) -> bool:
    api._webhook = ""
    if _bool(p, "drop_pending_updates"):
        api._updates.clear()
    return True


def get_webhook_info(api: BotApi, p: JSON) -> JSON:
    return {"url": api._webhook, "has_custom_certificate": False, "pending_update_count": len(api._updates)}


def send_message(api: BotApi, p: JSON) -> JSON:
    chat_id = _chat(p)
    text, parse_mode = _text(p)
    thread_id = _int(p, "message_thread_id", required=False)
    reply_to: JSON | None = None
    reply = _json(p, "reply_parameters") or {}
    wanted = reply.get("message_id") or _int(p, "reply_to_message_id", required=False)
    if wanted:
        reply_to = api._messages.get((chat_id, int(wanted)))
        if reply_to is None and not (
            reply.get("allow_sending_without_reply") or _bool(p, "allow_sending_without_reply")
        ):
            raise _error(400, "Bad Request: message to be replied not found")
    mid = api._message_id(chat_id)
    msg = wire.message_json(
        message_id=mid, sender=api.bot_user, chat=wire.chat_json(chat_id, forum=thread_id is not None),
        date=int(time.time()), text=text, thread_id=thread_id, reply_to=reply_to,
        reply_markup=_markup(p), with_entities=parse_mode is None,
    )  # fmt: skip
    api._messages[(chat_id, mid)] = msg
    api._posts.append((chat_id, mid, parse_mode))
    return msg


def send_chat_action(api: BotApi, p: JSON) -> bool:
    chat_id, action = _chat(p), str(p.get("action") or "")
    if action not in wire.CHAT_ACTIONS:
        raise _error(400, "Bad Request: wrong parameter action in request")
    thread_id = _int(p, "message_thread_id", required=False)
    api._actions.append(
        {"chat_id": chat_id, "thread_id": thread_id, "action": action, "at": time.monotonic()}
    )
    return True


def answer_callback_query(api: BotApi, p: JSON) -> bool:
    query_id = str(p.get("callback_query_id") or "")
    if api._callbacks.get(query_id, True):
        raise _error(400, "Bad Request: query is too old and response timeout expired or query ID is invalid")
    api._callbacks[query_id] = True
    return True


def edit_message_text(api: BotApi, p: JSON) -> JSON:
    key, old = _own_message(api, p)
    text, parse_mode = _text(p)
    return _edit(api, key, old, text=text, markup=_markup(p), with_entities=parse_mode is None)


def edit_message_reply_markup(api: BotApi, p: JSON) -> JSON:
    key, old = _own_message(api, p)
    return _edit(api, key, old, text=old["text"], markup=_markup(p), with_entities="entities" in old)


def delete_message(api: BotApi, p: JSON) -> bool:
    """deleteMessage of one of the bot's messages: ``posts()`` shows it ``deleted``; it cannot be edited."""
    key, _old = _own_message(api, p, "delete")
    api._deleted.add(key)
    return True


def set_message_reaction(api: BotApi, p: JSON) -> bool:
    """Records ``{"chat_id", "message_id", "emoji"}`` (the server's ``reactions()``); an empty list clears."""
    key = (_chat(p), _int(p, "message_id") or 0)
    if key not in api._messages:
        raise _error(400, "Bad Request: message to react not found")
    try:
        reaction = json.loads(str(p.get("reaction") or "[]"))
        emojis = [str(r["emoji"]) for r in reaction if r.get("type") == "emoji"]
    except (ValueError, TypeError, KeyError, AttributeError):
        raise _error(400, "Bad Request: can't parse reaction types JSON object") from None
    api._reactions.append({"chat_id": key[0], "message_id": key[1], "emoji": emojis[0] if emojis else ""})
    return True


def get_file(api: BotApi, p: JSON) -> JSON:
    """getFile: a file's ``file_path`` (relative to ``/file/bot<token>/``) and size (bot_api_files.py)."""
    files = api.files.files  # the server's lock is held: push_photo/push_document write under it too
    stored = files.get(str(p.get("file_id", "")))
    if stored is None:
        raise _error(400, "Bad Request: invalid file_id")
    return {
        "file_id": p["file_id"], "file_unique_id": stored.unique_id, "file_size": len(stored.data),
        "file_path": stored.file_path,
    }  # fmt: skip


METHODS: dict[str, Callable[[BotApi, JSON], Any]] = {
    "getme": get_me,
    "setwebhook": set_webhook,
    "deletewebhook": delete_webhook,
    "getwebhookinfo": get_webhook_info,
    "sendmessage": send_message,
    "sendchataction": send_chat_action,
    "answercallbackquery": answer_callback_query,
    "editmessagetext": edit_message_text,
    "editmessagereplymarkup": edit_message_reply_markup,
    "deletemessage": delete_message,
    "setmessagereaction": set_message_reaction,
    "getfile": get_file,
}


def _edit(
    api: BotApi, key: tuple[int, int], old: JSON, *, text: str, markup: JSON | None, with_entities: bool
) -> JSON:
    if old["text"] == text and old.get("reply_markup") == markup:
        raise _error(400, NOT_MODIFIED)
    msg = {k: v for k, v in old.items() if k not in ("text", "entities", "reply_markup", "edit_date")}
    msg = wire.message_json(
        message_id=msg["message_id"], sender=msg["from"], chat=msg["chat"], date=msg["date"], text=text,
        thread_id=msg.get("message_thread_id"), reply_to=msg.get("reply_to_message"), reply_markup=markup,
        edit_date=int(time.time()), with_entities=with_entities,
    )  # fmt: skip
    api._messages[key] = msg
    return msg


def _own_message(api: BotApi, p: JSON, verb: str = "edit") -> tuple[tuple[int, int], JSON]:
    if p.get("inline_message_id"):
        raise _error(400, "Bad Request: inline messages are not supported by the local server")
    key = (_chat(p), _int(p, "message_id") or 0)
    old = api._messages.get(key)
    if old is None or key in api._deleted:
        raise _error(400, f"Bad Request: message to {verb} not found")
    if old["from"]["id"] != api.bot_id:
        raise _error(400, f"Bad Request: message can't be {verb}d")
    return key, old


def _chat(p: JSON) -> int:
    raw = str(p.get("chat_id") or "")
    if not raw:
        raise _error(400, "Bad Request: chat_id is empty")
    try:
        return int(raw)
    except ValueError:
        raise _error(400, "Bad Request: chat not found") from None


def _text(p: JSON) -> tuple[str, str | None]:
    text, parse_mode = str(p.get("text") or ""), (str(p.get("parse_mode") or "") or None)
    if not text.strip():
        raise _error(400, "Bad Request: message text is empty")
    if wire.utf16_len(text) > MAX_TEXT:
        raise _error(400, "Bad Request: message is too long")
    why = wire.parse_error(text, parse_mode) if parse_mode else None
    if why:
        raise _error(400, why)
    return text, parse_mode


def _markup(p: JSON) -> JSON | None:
    markup = _json(p, "reply_markup")
    for row in (markup or {}).get("inline_keyboard", []):
        for button in row:
            data = button.get("callback_data")
            if data is not None and not 1 <= len(str(data).encode()) <= 64:
                raise _error(400, "Bad Request: BUTTON_DATA_INVALID")
    return markup or None


def _json(p: JSON, name: str) -> JSON | None:
    raw = p.get(name)
    if raw in (None, ""):
        return None
    try:
        value = json.loads(str(raw))
    except ValueError:
        raise _error(400, f"Bad Request: can't parse {name} JSON object") from None
    if not isinstance(value, dict):
        raise _error(400, f"Bad Request: {name} must be an object")
    return value


def _int(p: JSON, name: str, *, required: bool = True) -> int | None:
    raw = p.get(name)
    if raw in (None, ""):
        if required:
            raise _error(400, f"Bad Request: {name} is empty")
        return None
    try:
        return int(str(raw))
    except ValueError:
        raise _error(400, f"Bad Request: invalid {name} specified") from None


def _bool(p: JSON, name: str) -> bool:
    return str(p.get(name) or "").lower() in ("true", "1")
