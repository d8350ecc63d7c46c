"""Bot API JSON as Telegram sends it (User, Chat, Message, entities in UTF-16 units) and Telegram's
Markdown/MarkdownV2 parse errors, for the local Bot API server (bot_api_server.py)."""

from __future__ import annotations

import re
from typing import Any

JSON = dict[str, Any]

COMMAND = re.compile(r"(?<!\S)/[A-Za-z0-9_]{1,32}(?:@[A-Za-z0-9_]{3,32})?(?![A-Za-z0-9_@])")
MENTION = re.compile(r"(?<![A-Za-z0-9_@])@[A-Za-z0-9_]{5,32}(?![A-Za-z0-9_])")
CHAT_ACTIONS = frozenset(
    {
        "typing", "upload_photo", "record_video", "upload_video", "record_voice", "upload_voice",
        "upload_document", "choose_sticker", "find_location", "record_video_note", "upload_video_note",
    }
)  # fmt: skip
_V2_RESERVED = set("_*[]()~`>#+-=|{}.!")
_V2_NAMES = {
    "*": "Bold", "_": "Italic", "__": "Underline", "~": "Strikethrough", "||": "Spoiler", "[": "TextUrl",
}  # fmt: skip


def utf16_len(text: str) -> int:
    """Length in UTF-16 code units: the unit of Bot API entity offsets and lengths."""
    return len(text.encode("utf-16-le")) // 2


def entities(text: str) -> list[JSON]:
    """The ``bot_command`` and ``mention`` entities Telegram marks in a plain text message."""
    found = [(m, "bot_command") for m in COMMAND.finditer(text)]
    found += [(m, "mention") for m in MENTION.finditer(text)]
    found.sort(key=lambda pair: pair[0].start())
    return [
        {"type": kind, "offset": utf16_len(text[: m.start()]), "length": utf16_len(m.group())}
        for m, kind in found
    ]


def user_json(user_id: int, *, username: str = "", first_name: str = "", is_bot: bool = False) -> JSON:
    user: JSON = {"id": user_id, "is_bot": is_bot, "first_name": first_name or username or f"User {user_id}"}
    if username:
        user["username"] = username
    return user


def chat_json(chat_id: int, *, forum: bool = False) -> JSON:
    """A private chat for a positive id, a supergroup (a forum when it has topics) for a negative one."""
    if chat_id > 0:
        return {"id": chat_id, "type": "private", "first_name": f"User {chat_id}"}
    chat: JSON = {"id": chat_id, "type": "supergroup", "title": f"Chat {chat_id}"}
    if forum:
        chat["is_forum"] = True
    return chat


def message_json(
    *,
    message_id: int,
    sender: JSON,
    chat: JSON,
    date: int,
    text: str,
    thread_id: int | None = None,
    reply_to: JSON | None = None,
    reply_markup: JSON | None = None,
    edit_date: int | None = None,
    with_entities: bool = True,
) -> JSON:
    msg: JSON = {"message_id": message_id, "from": sender, "chat": chat, "date": date}
    if thread_id is not None:
        msg["message_thread_id"] = thread_id
        msg["is_topic_message"] = True
    if reply_to is not None:
        msg["reply_to_message"] = reply_to
    if edit_date is not None:
        msg["edit_date"] = edit_date
    msg["text"] = text
    ents = entities(text) if with_entities else []
    if ents:
        msg["entities"] = ents
    if reply_markup:
        msg["reply_markup"] = reply_markup
    return msg


def parse_error(text: str, parse_mode: str) -> str | None:
    """Telegram's "can't parse entities" description for ``text`` in ``parse_mode``, or None if it parses.
    Covers the rules models trip over (unclosed entities; MarkdownV2's reserved characters), not every
    rendering detail: the server never renders the markup."""
    mode = parse_mode.lower()
    why = _markdown_error(text) if mode == "markdown" else _v2_error(text) if mode == "markdownv2" else None
    if mode not in ("markdown", "markdownv2", "html"):
        return f"Bad Request: unsupported parse_mode {parse_mode}"
    return f"Bad Request: can't parse entities: {why}" if why else None


def _byte_offset(text: str, index: int) -> int:
    return len(text[:index].encode())


def _markdown_error(text: str) -> str | None:
    """Legacy Markdown: ``*bold*``, ``_italic_``, `` `code` ``, ```` ```pre``` ````, ``[text](url)``; no
    nesting; a backslash escapes one of ``_*`[``."""
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == "\\" and i + 1 < n and text[i + 1] in "_*`[":
            i += 2
            continue
        if c not in "_*`[":
            i += 1
            continue
        start = i
        close = "```" if text.startswith("```", i) else "]" if c == "[" else c
        end = text.find(close, i + len(close))
        if end < 0:
            return f"Can't find end of the entity starting at byte offset {_byte_offset(text, start)}"
        i = end + len(close)
        if c == "[" and text.startswith("(", i):
            end = text.find(")", i)
            if end < 0:
                return f"Can't find end of a URL at byte offset {_byte_offset(text, i)}"
            i = end + 1
    return None


def _v2_error(text: str) -> str | None:
    """MarkdownV2: nested ``*`` ``_`` ``__`` ``~`` ``||`` entities, code, links, ``>`` quotes at a line start;
    every other reserved character must be escaped with a backslash."""
    stack: list[tuple[str, int]] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == "\\":
            i += 2
            continue
        if c == "`":
            tag = "```" if text.startswith("```", i) else "`"
            end = _find_unescaped(text, tag, i + len(tag))
            if end < 0:
                kind = "Pre" if tag == "```" else "Code"
                return f"Can't find end of {kind} entity at byte offset {_byte_offset(text, i)}"
            i = end + len(tag)
            continue
        marker = "__" if text.startswith("__", i) else "||" if text.startswith("||", i) else c
        if marker in ("*", "_", "__", "~", "||"):
            if stack and stack[-1][0] == marker:
                stack.pop()
            else:
                stack.append((marker, i))
            i += len(marker)
            continue
        if c == "[":
            stack.append(("[", i))
        elif c == "]" and stack and stack[-1][0] == "[":
            stack.pop()
            if text.startswith("(", i + 1):
                end = _find_unescaped(text, ")", i + 2)
                if end < 0:
                    return f"Can't find end of a URL at byte offset {_byte_offset(text, i + 1)}"
                i = end
        elif c == ">" and (i == 0 or text[i - 1] == "\n"):
            pass
        elif c in _V2_RESERVED:
            return f"Character '{c}' is reserved and must be escaped with the preceding '\\'"
        i += 1
    if stack:
        marker, at = stack[-1]
        return f"Can't find end of {_V2_NAMES[marker]} entity at byte offset {_byte_offset(text, at)}"
    return None


def _find_unescaped(text: str, tag: str, start: int) -> int:
    i = start
    while i < len(text):
        if text[i] == "\\":
            i += 2
            continue
        if text.startswith(tag, i):
            return i
        i += 1
    return -1
