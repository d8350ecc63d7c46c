"""Telegram inbound files: the photo or document of a message as :class:`Attachment`, and its download —
getFile, then the file from the configured Bot API host. The download URL is built and checked (same
scheme, host and port as ``base_url``, a relative file path without ``..``) before the token is put in it,
so the token never goes to another host, whatever file path the server answers."""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote, urlsplit

import httpx
from telegram import Message

from geode.messengers.errors import PlatformError, Rejected
from geode.messengers.model import Attachment, clean_text

DOWNLOAD_TIMEOUT_S = 60.0
_CHUNK = 64 * 1024
_BAD_PATH = re.compile(r"[\x00-\x1f\x7f\\?#]")


class UnsafeFileUrl(Rejected):
    """getFile answered a file path that is not a plain relative path on the configured host."""


class TooLarge(Rejected):
    """The file is larger than ``[messengers] max_attachment_bytes`` (nothing is kept)."""


@dataclass(frozen=True)
class SavedFile:
    path: Path
    sha256: str
    size: int


def attachments_of(msg: Message) -> tuple[Attachment, ...]:
    """The message's photo (its largest size; Telegram sends photos as JPEG), document, and voice note or
    audio file (kind ``voice``: transcribed, geode/messengers/inbox.py), if any."""
    found: list[Attachment] = []
    if msg.photo:
        best = msg.photo[-1]
        found.append(
            Attachment(
                kind="photo",
                file_id=best.file_id,
                file_name=f"photo-{best.file_unique_id}.jpg",
                media_type="image/jpeg",
                size=best.file_size or 0,
            )
        )
    doc = msg.document
    if doc is not None:
        found.append(
            Attachment(
                kind="document",
                file_id=doc.file_id,
                file_name=clean_text(doc.file_name or f"file-{doc.file_unique_id}"),  # safe_name() later
                media_type=clean_text(doc.mime_type or "application/octet-stream").lower(),
                size=doc.file_size or 0,
            )
        )
    for sound, ext in ((msg.voice, "ogg"), (msg.audio, "mp3")):
        if sound is not None:
            named = getattr(sound, "file_name", None) or f"voice-{sound.file_unique_id}.{ext}"
            found.append(
                Attachment(
                    kind="voice",
                    file_id=sound.file_id,
                    file_name=clean_text(named),  # safe_name() later
                    media_type=clean_text(sound.mime_type or f"audio/{ext}").lower(),
                    size=sound.file_size or 0,
                )
            )
    return tuple(found)


def file_base_url(base_url: str) -> str:
    """The Bot API's file URL base for ``base_url`` (``https://api.telegram.org/bot`` →
    ``https://api.telegram.org/file/bot``); the token follows it."""
    api = urlsplit(base_url)
    prefix = api.path.rstrip("/")
    prefix = prefix.removesuffix("/bot") if prefix.endswith("/bot") else prefix
    return f"{api.scheme}://{api.netloc}{prefix}/file/bot"


def file_url(base_url: str, file_path: str, token: str) -> str:
    """The download URL of ``file_path``, checked before ``token`` goes in: a relative path (no scheme, no
    host, no leading ``/``, no ``..`` segment, no ``\\``, ``?``, ``#`` or control character) on the host of
    ``base_url``. Anything else is :class:`UnsafeFileUrl` and no request is made."""
    parts = urlsplit(file_path)
    segments = file_path.split("/")
    if (
        not file_path
        or parts.scheme
        or parts.netloc
        or file_path.startswith("/")
        or ".." in segments
        or _BAD_PATH.search(file_path)
    ):
        raise UnsafeFileUrl(
            f"getFile answered a file path that is not on the Bot API host: {file_path[:80]!r}"
        )
    base = file_base_url(base_url)
    bare = f"{base}/{quote(file_path)}"
    if urlsplit(bare).netloc != urlsplit(base_url).netloc or not urlsplit(base_url).netloc:
        raise UnsafeFileUrl(f"the file URL would leave the Bot API host: {file_path[:80]!r}")
    return f"{base}{token}/{quote(file_path)}"


async def download(
    url: str,
    dest: Path,
    max_bytes: int,
    *,
    token: str,
    headers: dict[str, str] | None = None,
    refuse_html: bool = False,
) -> SavedFile:
    """Stream ``url`` into ``dest`` (a temporary name, renamed when whole; 0600), hashing as it goes. Over
    ``max_bytes``: :class:`TooLarge` and nothing kept. Errors never carry the token. ``headers`` go with the
    request (Slack's bot token: geode/messengers/chat_files.py, its URL checked first); ``refuse_html``: a
    ``text/html`` answer is a sign-in page, not the file (:class:`Rejected`, nothing kept)."""
    tmp = dest.with_name(f".{dest.name}.part")
    digest, size = hashlib.sha256(), 0
    try:
        async with httpx.AsyncClient(timeout=DOWNLOAD_TIMEOUT_S, follow_redirects=False) as client:
            async with client.stream("GET", url, headers=headers) as resp:
                if resp.status_code != 200:
                    why = f"the file download answered HTTP {resp.status_code}"
                    if resp.status_code == 429 or resp.status_code >= 500:
                        raise PlatformError(why, retryable=True)  # the batch is tried again
                    raise Rejected(why)
                if refuse_html and resp.headers.get("content-type", "").startswith("text/html"):
                    raise Rejected("the file host answered a web page, not the file (a sign-in page?)")
                fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
                with os.fdopen(fd, "wb") as out:
                    async for chunk in resp.aiter_bytes(_CHUNK):
                        size += len(chunk)
                        if size > max_bytes:
                            raise TooLarge(f"the file is larger than {max_bytes:,} bytes")
                        digest.update(chunk)
                        out.write(chunk)
        os.replace(tmp, dest)
    except httpx.HTTPError as exc:
        tmp.unlink(missing_ok=True)
        why = f"the file download failed: {type(exc).__name__}: {exc}"
        why = why.replace(token, "<token>") if token else why
        raise PlatformError(why, retryable=True) from None  # the batch is tried again
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return SavedFile(dest, digest.hexdigest(), size)
