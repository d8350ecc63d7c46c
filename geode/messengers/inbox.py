"""A chat message's files (a photo, documents): checked against ``[messengers] max_attachment_bytes`` and
``attachment_types``, fetched through the platform's translator and saved under the chat's workspace as
``inbox/<message-id>/<safe name>`` (0600, written whole or not at all), then referenced by sha256 and path in
the turn's durable input: pictures as image blocks the model sees, every file as a line of the prompt with
its path. A file already saved (a restart before the turn was recorded) is hashed again, not re-downloaded;
a turn already recorded is never fetched again (the poller's dedupe). A file over the limit, of a type not
allowed, or that cannot be fetched for good gets one short receipted reply and no turn; nothing is kept.
A voice note (any audio type, within the size limit) is saved the same way and transcribed
(geode/messengers/voice_notes.py); with ``[messengers] transcription`` unset it is answered "not enabled"."""

from __future__ import annotations

import asyncio
import fnmatch
import hashlib
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from geode.conversation import ImageBlock
from geode.home import GeodeHome
from geode.messengers import voice_notes
from geode.messengers.config import MessengerBinding, MessengersSection
from geode.messengers.errors import Rejected
from geode.messengers.model import Attachment, InboundMessage
from geode.messengers.notices import Poller
from geode.messengers.sessions import reply_operation_id, session_id_for, turn_id_for
from geode.messengers.transcription import Transcriber
from geode.messengers.workspaces import chat_workspace
from geode.protocol import messengers as messengers_msg

log = logging.getLogger(__name__)
INBOX = "inbox"
IMAGE_TYPES = frozenset({"image/jpeg", "image/png", "image/gif", "image/webp"})  # what the models take
MAX_NAME = 120
_UNSAFE_NAME = re.compile(r"[\x00-\x1f\x7f/\\:]")


@dataclass(frozen=True)
class InboxLimits:
    max_bytes: int
    types: tuple[str, ...]

    @classmethod
    def of(cls, section: MessengersSection) -> InboxLimits:
        return cls(section.max_attachment_bytes, tuple(section.attachment_types))

    def allows(self, media_type: str) -> bool:
        return any(fnmatch.fnmatchcase(media_type.lower(), t) for t in self.types)


@dataclass
class Taken:
    """What a message's files add to its turn: image blocks and file references (each with its sha256)."""

    images: list[ImageBlock] = field(default_factory=list)
    files: list[dict[str, Any]] = field(default_factory=list)
    transcripts: dict[str, str] = field(default_factory=dict)  # a voice note's path -> its transcript

    def prompt(self, text: str) -> str:
        """The caption (the message's text) with one line per saved file: the model can open it by path; a
        voice note as its transcript, marked as one."""
        lines = [
            voice_notes.render(f, self.transcripts[f["path"]])
            if f["path"] in self.transcripts
            else f"[{f['kind']} saved: {f['path']} ({f['media_type']}, {f['size']:,} bytes)]"
            for f in self.files
        ]
        return "\n".join([text, *lines]) if text else "\n".join(lines)

    def refs(self) -> dict[str, Any]:
        """The turn input's ``images`` (ImageBlock dicts) and ``files`` keys (none without files)."""
        if not self.files:
            return {}
        return {"images": [i.model_dump() for i in self.images], "files": self.files}


class Inbox:
    """Where a poller saves inbound files: ``workspace(binding)/inbox/<message-id>/``."""

    def __init__(
        self,
        workspace: Callable[[MessengerBinding], Path],
        limits: InboxLimits,
        transcriber: Transcriber | None = None,
    ) -> None:
        self.workspace, self.limits, self.transcriber = workspace, limits, transcriber

    @classmethod
    def of(cls, home: GeodeHome, section: MessengersSection, transcriber: Transcriber | None = None) -> Inbox:
        """The daemon's inbox: each chat's workspace (workspaces.chat_workspace), ``section``'s limits, the
        voice notes' ``transcriber`` (None: voice notes are not enabled)."""
        return cls(lambda binding: chat_workspace(binding, home), InboxLimits.of(section), transcriber)

    def refusal(self, att: Attachment) -> str | None:
        """Why ``att`` is not taken before fetching it (its declared type or size), or None."""
        what = "photo" if att.kind == "photo" else f"file {safe_name(att.file_name, 'file')!r}"
        if att.kind != "voice" and not self.limits.allows(att.media_type):  # voice: transcription says
            allowed = ", ".join(self.limits.types) or "none"
            kind = att.media_type or "unknown"
            return f"Sorry, I can't take {kind} files (allowed: {allowed}); {what} was not read."
        if att.size > self.limits.max_bytes:
            return (
                f"Sorry, that {what} is too large for me ({att.size:,} bytes; the limit is "
                f"{self.limits.max_bytes:,}); it was not saved."
            )
        return None

    async def save(self, translator: Any, msg: InboundMessage, binding: MessengerBinding) -> Taken | str:
        """Save every file of ``msg`` (all checked first): a :class:`Taken`, or the reply text of a refusal
        (nothing of the message kept). A retryable platform error propagates (the batch is tried again)."""
        taken = Taken()
        if not msg.attachments:
            return taken
        for att in msg.attachments:
            if (why := self.refusal(att)) is not None:
                return why
        folder = (
            await asyncio.to_thread(self.workspace, binding) / INBOX / safe_name(msg.message_id, "message")
        )
        saved: list[tuple[Attachment, Path, str, int]] = []
        try:
            for i, att in enumerate(msg.attachments):
                name = safe_name(att.file_name, f"file-{i + 1}")
                if any(p.name == name for _, p, _, _ in saved):
                    name = f"{i + 1}-{name}"
                dest = folder / name
                got = await asyncio.to_thread(_already_saved, dest, att.size)
                if got is None:
                    await asyncio.to_thread(_make_dir, folder)
                    fetched = await translator.fetch_file(att, dest, self.limits.max_bytes)
                    got = (fetched.sha256, fetched.size)
                saved.append((att, dest, *got))
        except Rejected as exc:
            await asyncio.to_thread(_discard, folder, [p for _, p, _, _ in saved])
            log.info("%s message %s: a file was not taken: %s", msg.platform, msg.message_id, exc)
            return _fetch_refusal(str(exc), self.limits.max_bytes)
        for att, dest, sha, size in saved:
            ref = {
                "kind": att.kind,
                "path": str(dest),
                "sha256": sha,
                "size": size,
                "media_type": att.media_type,
            }
            taken.files.append(ref)
            if att.media_type in IMAGE_TYPES and att.kind != "voice":
                taken.images.append(
                    ImageBlock(media_type=att.media_type, sha256=sha, path=str(dest), size=size)
                )
        said = await voice_notes.transcribe(self.transcriber, taken.files)
        if isinstance(said, str):  # not transcribed: no turn on empty text, nothing of the message kept
            await asyncio.to_thread(_discard, folder, [p for _, p, _, _ in saved])
            return said
        taken.transcripts = said
        return taken


def safe_name(name: str, fallback: str) -> str:
    """``name`` as one file name inside the inbox: path separators, ``:`` and control characters become
    ``_``, every ``..`` becomes ``_``, leading dots are dropped, at most ``MAX_NAME`` characters; an empty
    result is ``fallback``."""
    cleaned = _UNSAFE_NAME.sub("_", name).replace("..", "_").lstrip(". ").strip()
    if len(cleaned) > MAX_NAME:
        stem, dot, ext = cleaned.rpartition(".")
        cleaned = (
            (stem[: MAX_NAME - len(ext) - 1] + dot + ext) if dot and len(ext) <= 10 else cleaned[:MAX_NAME]
        )
    return cleaned or fallback


async def take_files(poller: Poller, msg: InboundMessage, binding: MessengerBinding) -> Taken | None:
    """``msg``'s files saved (a :class:`Taken`, empty without files), or None when they were refused: the
    sender then gets one short receipted reply saying why, and no turn runs."""
    if not msg.attachments:
        return Taken()
    inbox: Inbox | None = getattr(poller, "inbox", None)
    if inbox is not None and inbox.transcriber is None and voice_notes.has_voice(msg):
        await voice_notes.not_enabled(poller, msg)  # "voice notes are not enabled", once per chat per hour
        return None
    result: Taken | str = (
        "Sorry, this bot does not take files; it was not read."
        if inbox is None
        else await inbox.save(poller.translator, msg, binding)
    )
    if isinstance(result, Taken):
        return result
    poller.status.unhandled["attachment"] += 1
    state = poller.out.state
    assert state is not None
    key = msg.channel_key
    gen = await asyncio.to_thread(state.generation, key)
    turn_id = turn_id_for(poller.platform, key, msg.turn_message_id)
    req = messengers_msg.DeliverReply(
        operation_id=reply_operation_id(turn_id),
        session_id=session_id_for(poller.platform, key, gen, poller.settings.session_key),
        turn_id=turn_id,
        channel=f"{poller.platform}:{key}",
        text=result,
        reply_to=msg.message_id,
    )
    poller.out.spawn(poller.out.command_reply(req))
    return None


def _fetch_refusal(why: str, max_bytes: int) -> str:
    if "larger than" in why:
        return f"Sorry, that file is too large for me (over {max_bytes:,} bytes); it was not saved."
    return "Sorry, I could not fetch that file from the chat; it was not read."


def _already_saved(dest: Path, declared: int) -> tuple[str, int] | None:
    """(sha256, size) of a file saved whole before (its declared size, when known, agrees), else None."""
    try:
        data = dest.read_bytes()
    except OSError:
        return None
    if declared and len(data) != declared:
        return None
    return hashlib.sha256(data).hexdigest(), len(data)


def _make_dir(folder: Path) -> None:
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)


def _discard(folder: Path, files: list[Path]) -> None:
    """Nothing of a refused message is kept: its files so far, then its folder if empty."""
    for p in files:
        p.unlink(missing_ok=True)
        voice_notes.discard(p)
    try:
        folder.rmdir()
    except OSError:
        pass
