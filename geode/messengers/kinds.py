"""Message kinds: which non-text kinds of chat message GEODE handles per platform, and what kind a Telegram
message without text is. A message of a kind not handled (a sticker, a voice note, a file ...) is answered
"not supported" once per chat per kind per hour (geode/messengers/notices.py), never ignored in silence.

Coordination point between areas: Telegram photos and documents, Slack files and Discord attachments
(``PHOTO``, ``FILE``) are handled: saved to the chat's inbox and given to the model
(geode/messengers/inbox.py), with or without a caption. Voice notes (``VOICE``: Telegram voice and audio,
Slack audio clips, Discord voice messages) are saved the same way and transcribed when ``[messengers]
transcription`` names a backend, else answered "not enabled" once per chat per hour (inbox.py). Stickers
are not handled."""

from __future__ import annotations

from typing import Any

PHOTO = "photo"
STICKER = "sticker"
FILE = "file"
VOICE = "voice"
AUDIO = "audio"  # a Telegram audio file: taken as a voice note (transcribed)

HANDLED_KINDS: dict[str, frozenset[str]] = {
    "telegram": frozenset({PHOTO, FILE, VOICE, AUDIO}),  # saved to the chat's inbox (messengers/inbox.py)
    "slack": frozenset({FILE, VOICE}),  # files shared (images among them): chat_files.py, inbox.py
    "discord": frozenset({PHOTO, FILE, VOICE}),  # attachments: chat_files.py, inbox.py
}

# Telegram Message attributes that make a message of that kind, checked in this order (PTB names)
_TELEGRAM_KINDS: tuple[tuple[str, str], ...] = (
    ("sticker", STICKER),
    ("photo", PHOTO),
    ("voice", VOICE),
    ("video_note", "video_note"),
    ("audio", AUDIO),
    ("animation", "animation"),
    ("video", "video"),
    ("document", FILE),
    ("location", "location"),
    ("venue", "venue"),
    ("contact", "contact"),
    ("poll", "poll"),
    ("dice", "dice"),
)


def handles(platform: str, kind: str) -> bool:
    return kind in HANDLED_KINDS.get(platform, frozenset())


def telegram_kind(message: Any) -> str:
    """The kind of a Telegram message that carries something other than text ("" when none is recognised:
    a service message such as a member joining is no user's message and is ignored)."""
    for attr, kind in _TELEGRAM_KINDS:
        if getattr(message, attr, None):
            return kind
    return ""
