"""Slack files and Discord attachments as :class:`Attachment`, and their download (saved by
geode/messengers/inbox.py like Telegram's). A file's URL is checked before any request: Slack's bot token
goes only to ``https://files.slack.com`` or the host of the configured Slack API base (a workspace served
elsewhere, the local server), as an ``Authorization`` header, never in the URL; a Discord attachment is
fetched without a token, and only from ``cdn.discordapp.com`` / ``media.discordapp.net`` or the configured
API base's host. Any other URL is :class:`UnsafeFileUrl` and nothing is requested."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from geode.messengers import kinds
from geode.messengers.model import Attachment, clean_text
from geode.messengers.telegram_files import SavedFile, UnsafeFileUrl, download

__all__ = [
    "Attachment", "SavedFile", "UnsafeFileUrl", "checked_url", "discord_attachments", "fetch_discord",
    "fetch_slack", "slack_attachments", "slack_kind",
]  # fmt: skip
SLACK_FILE_HOSTS = frozenset({"files.slack.com"})
DISCORD_FILE_HOSTS = frozenset({"cdn.discordapp.com", "media.discordapp.net"})
MAX_URL = 2_048


def _attachment(
    file_id: str, name: str, media_type: str, size: Any, voice: bool = False
) -> Attachment | None:
    if not file_id or len(file_id) > MAX_URL:
        return None
    media = clean_text(media_type or "application/octet-stream").lower()[:128]
    return Attachment(
        kind="voice" if voice else "photo" if media.startswith("image/") else "document",
        file_id=file_id,
        file_name=clean_text(name or "file")[:200],  # safe_name() later
        media_type=media,
        size=size if isinstance(size, int) and size >= 0 else 0,
    )


def slack_kind(event: dict[str, Any]) -> str:
    """The kind of a Slack message's files: ``voice`` for an audio clip (transcribed), else ``file``."""
    files = [f for f in event.get("files") or [] if isinstance(f, dict)]
    if any(f.get("subtype") == "slack_audio" for f in files):
        return kinds.VOICE
    return kinds.FILE if files else ""


def slack_attachments(event: dict[str, Any]) -> tuple[Attachment, ...]:
    """The files shared with a Slack message (``url_private_download``, else ``url_private``); an audio clip
    (subtype ``slack_audio``) is a voice note."""
    found = []
    for f in event.get("files") or []:
        if not isinstance(f, dict) or f.get("mode") in ("tombstone", "hidden_by_limit"):
            continue
        url = str(f.get("url_private_download") or f.get("url_private") or "")
        att = _attachment(url, str(f.get("name") or f.get("title") or ""), str(f.get("mimetype") or ""),
                          f.get("size"), f.get("subtype") == "slack_audio")  # fmt: skip
        if att is not None:
            found.append(att)
    return tuple(found)


def discord_attachments(message: Any) -> tuple[Attachment, ...]:
    """A Discord message's attachments (discord.py ``Attachment``: url, filename, content_type, size); the
    audio of a voice message (the message flag IS_VOICE_MESSAGE, 8192) is a voice note."""
    found = []
    flags = getattr(message, "flags", None)
    voice = bool(flags is not None and getattr(flags, "voice", False))
    for a in getattr(message, "attachments", None) or []:
        ctype = str(getattr(a, "content_type", "") or "")
        att = _attachment(str(getattr(a, "url", "") or ""), str(getattr(a, "filename", "") or ""), ctype,
                          getattr(a, "size", 0), voice and ctype.startswith("audio/"))  # fmt: skip
        if att is not None:
            found.append(att)
    return tuple(found)


def checked_url(url: str, hosts: frozenset[str], base_url: str) -> str:
    """``url`` when it is ``https`` on one of ``hosts`` or on the very scheme, host and port of
    ``base_url`` (no user info, no fragment); else :class:`UnsafeFileUrl`."""
    parts, base = urlsplit(url), urlsplit(base_url)
    on_platform = parts.scheme == "https" and (parts.hostname or "") in hosts and parts.port is None
    on_base = bool(base.netloc) and (parts.scheme, parts.netloc) == (base.scheme, base.netloc)
    if not (on_platform or on_base) or "@" in parts.netloc or parts.fragment:
        raise UnsafeFileUrl(f"a file URL that is not on the platform's file host: {parts.netloc[:80]!r}")
    return url


async def fetch_slack(att: Attachment, dest: Path, max_bytes: int, *, token: str, base_url: str) -> SavedFile:
    """A Slack file, the bot token sent as a header only to a checked host. Slack answers a file it will not
    give this token (no ``files:read`` scope, another workspace) with its sign-in page: refused, not kept."""
    url = checked_url(att.file_id, SLACK_FILE_HOSTS, base_url)
    auth = {"Authorization": f"Bearer {token}"}
    html = att.media_type == "text/html"
    return await download(url, dest, max_bytes, token=token, headers=auth, refuse_html=not html)


async def fetch_discord(att: Attachment, dest: Path, max_bytes: int, *, base_url: str) -> SavedFile:
    """A Discord attachment, from a checked host and with no token."""
    url = checked_url(att.file_id, DISCORD_FILE_HOSTS, base_url)
    return await download(url, dest, max_bytes, token="")
