"""Voice notes in a chat turn: a saved voice note (geode/messengers/inbox.py) is transcribed by the configured
backend (geode/messengers/transcription.py) and reaches the model as the message's text, clearly marked as
the transcript of a voice note, after any caption. The transcript is kept beside the file
(``.<name>.transcript``, with the file's sha256), so a redelivery after a restart neither downloads nor
transcribes it again. Transcription unset: the sender is told once per chat per hour that voice notes are not
enabled (the notices path, geode/messengers/notices.py); a failed transcription gets a short reply and no turn
runs on empty text."""

from __future__ import annotations

import asyncio
import logging
import os
from pathlib import Path
from typing import Any

from geode.messengers import kinds, notices
from geode.messengers.model import InboundMessage, unhandled
from geode.messengers.transcription import Transcriber, TranscriptionFailed
from geode.redaction import redact_text

log = logging.getLogger(__name__)
FAILED = "Sorry, I could not transcribe that voice note; it was not read. Please try again or send text."


def has_voice(msg: InboundMessage) -> bool:
    return any(a.kind == "voice" for a in msg.attachments)


async def not_enabled(poller: notices.Poller, msg: InboundMessage) -> None:
    """A voice note with transcription unset: the "not enabled" notice (once per chat per hour, counted as
    ``unsupported.voice``); nothing is downloaded and no turn runs."""
    fields = msg.model_dump(include={"platform", "chat_id", "thread_id", "message_id", "sender_id"})
    item = unhandled("unsupported", kind=kinds.VOICE, mentioned=msg.mentioned, from_bot=msg.from_bot,
                     edited=msg.edited, **fields)  # fmt: skip
    await notices.answer_unhandled(poller, item)


def render(ref: dict[str, Any], text: str) -> str:
    """A voice note as prompt text: the transcript between two marker lines naming the saved file."""
    head = f"[transcript of a voice note (saved: {ref['path']}, {ref['media_type']}, {ref['size']:,} bytes)]"
    return f"{head}\n{text}\n[end of transcript]"


async def transcribe(transcriber: Transcriber | None, files: list[dict[str, Any]]) -> dict[str, str] | str:
    """The transcript of each saved voice note in ``files`` (by path), or the reply text of a failure."""
    out: dict[str, str] = {}
    for ref in files:
        if ref["kind"] != "voice":
            continue
        path = Path(ref["path"])
        cached = await asyncio.to_thread(_cached, path, ref["sha256"])
        if cached is not None:
            out[ref["path"]] = cached
            continue
        if transcriber is None:
            return FAILED
        try:
            text = await transcriber.transcribe(path, ref["media_type"])
        except TranscriptionFailed as exc:
            log.warning(
                "voice note %s not transcribed (%s): %s", path.name, transcriber.name, redact_text(str(exc))
            )
            return FAILED
        await asyncio.to_thread(_keep, path, ref["sha256"], text)
        out[ref["path"]] = text
    return out


def cache_path(path: Path) -> Path:
    return path.with_name(f".{path.name}.transcript")


def _cached(path: Path, sha256: str) -> str | None:
    try:
        first, _, text = cache_path(path).read_text(encoding="utf-8").partition("\n")
    except (OSError, UnicodeDecodeError):
        return None
    return text if first == sha256 and text else None


def _keep(path: Path, sha256: str, text: str) -> None:
    """The transcript beside the file (0600, written whole or not at all); best effort."""
    dest = cache_path(path)
    tmp = dest.with_name(dest.name + ".part")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(f"{sha256}\n{text}")
        os.replace(tmp, dest)
    except OSError as exc:
        log.info("voice note transcript not kept beside %s: %s", path.name, exc)
        tmp.unlink(missing_ok=True)


def discard(path: Path) -> None:
    cache_path(path).unlink(missing_ok=True)
