"""Deterministic ids of messenger traffic: a chat's session (per ``/new`` generation), a message's turn, the
reply's receipt operation and the message's dedupe key. Printable, at most 128 characters, the same on every
restart; a short hash of the exact parts keeps ids of different chats, topics and messages apart even when the
readable part is cut or cleaned. A session id's hash is keyed with the home's session-id key
(:func:`geode.home_secrets.session_id_key`), so nobody outside the home can compute a chat's session id."""

from __future__ import annotations

import hashlib
import hmac
import re

MAX_ID = 128
_UNSAFE = re.compile(r"[^A-Za-z0-9_.:\-]")
_HASH_HEX = 12  # 48 bits of the exact parts
_SESSION_HEX = 16  # 64 bits of HMAC-SHA256 under the home's key
MIN_KEY = 16


def _readable(text: str, limit: int) -> str:
    return _UNSAFE.sub("_", text)[:limit] or "_"


def _digest(*parts: str) -> str:
    return hashlib.sha256("\x00".join(parts).encode("utf-8", "surrogatepass")).hexdigest()[:_HASH_HEX]


def session_id_for(platform: str, channel_key: str, generation: int, key: bytes) -> str:
    """The session of a chat or topic (``channel_key`` = ``"<chat_id>[:<thread_id>]"``); ``generation``
    counts the chat's ``/new`` commands (0 before the first); ``key`` is the home's session-id key."""
    if not 0 <= generation < 2**63:
        raise ValueError(f"generation must be in 0..2**63-1, not {generation}")
    if len(key) < MIN_KEY:
        raise ValueError(f"a session-id key has at least {MIN_KEY} bytes")
    parts = "\x00".join(("session", platform, channel_key, str(generation))).encode("utf-8", "surrogatepass")
    h = hmac.new(key, parts, hashlib.sha256).hexdigest()[:_SESSION_HEX]
    return f"s-{_readable(platform, 12)}-{_readable(channel_key, 64)}-g{generation}-{h}"


def turn_id_for(platform: str, channel_key: str, message_id: str) -> str:
    """The turn of one inbound message: a redelivered update gets the same id, so lanes stores one turn."""
    h = _digest("turn", platform, channel_key, message_id)
    return f"t-{_readable(platform, 12)}-{_readable(channel_key, 48)}-m{_readable(message_id, 32)}-{h}"


def reply_operation_id(turn_id: str) -> str:
    """The receipt operation id of a turn's reply (``messenger.deliver``): the same for every retry."""
    op = f"reply-{turn_id}"
    return op if len(op) <= MAX_ID and not _UNSAFE.search(turn_id) else f"reply-h{_digest('reply', turn_id)}"


def dedupe_key(platform: str, channel_key: str, message_id: str) -> str:
    """The durable dedupe key of one inbound message (store ``cursors`` dedupe)."""
    h = _digest("dedupe", platform, channel_key, message_id)
    return f"msg-{_readable(platform, 12)}-{_readable(channel_key, 48)}-m{_readable(message_id, 32)}-{h}"
