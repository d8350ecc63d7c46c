"""Files on the local Bot API server: a user's photo, document or voice message (the bytes kept under a file
id), ``getFile`` (its ``file_path``, size), and the download route ``/file/bot<token>/<file_path>`` as
Telegram serves it. Every download is recorded (path, token right or not) so a test sees what was fetched."""

from __future__ import annotations

import copy
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from geode.testing import bot_api_wire as wire
from geode.testing.bot_api_wire import JSON


@dataclass
class StoredFile:
    data: bytes
    file_path: str  # what getFile answers (a test may make it a foreign URL)
    unique_id: str


@dataclass
class FileStore:
    """The server's files by file id, and every download asked for (``{"path", "status"}``)."""

    files: dict[str, StoredFile] = field(default_factory=dict)
    downloads: list[JSON] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, file_id: str, data: bytes, file_path: str) -> None:
        with self.lock:
            self.files[file_id] = StoredFile(data, file_path, f"u{file_id}")

    def set_path(self, file_id: str, file_path: str) -> None:
        """What getFile answers as ``file_path`` for ``file_id`` (e.g. a URL on another host)."""
        with self.lock:
            self.files[file_id].file_path = file_path

    def downloaded(self) -> list[JSON]:
        with self.lock:
            return copy.deepcopy(self.downloads)


def _file_message(api: Any, chat_id: int, caption: str, sender_id: int, username: str) -> tuple[int, JSON]:
    """A new message (no text; the caption, if any) from a user; the caller holds the lock."""
    mid = api._message_id(chat_id)
    sender = wire.user_json(int(sender_id), username=username)
    msg = wire.message_json(
        message_id=mid, sender=sender, chat=wire.chat_json(chat_id), date=int(time.time()), text=""
    )
    del msg["text"]
    if caption:
        msg["caption"] = caption
    return mid, msg


def push_photo(
    api: Any,
    chat_id: int,
    data: bytes,
    *,
    caption: str = "",
    sender_id: int = 1001,
    username: str = "alice",
    declared_size: int | None = None,
) -> JSON:
    """Queue a user's photo (two sizes, the largest ``data``) with an optional caption; return it."""
    chat_id = int(chat_id)
    with api._lock:
        mid, msg = _file_message(api, chat_id, caption, sender_id, username)
        big, small = f"photo-{chat_id}-{mid}", f"photo-{chat_id}-{mid}-s"
        api.files.add(big, data, f"photos/file_{mid}.jpg")
        api.files.add(small, data[:64], f"photos/file_{mid}_s.jpg")
        size = len(data) if declared_size is None else declared_size
        msg["photo"] = [
            {"file_id": small, "file_unique_id": f"u{small}", "width": 90, "height": 90, "file_size": 64},
            {"file_id": big, "file_unique_id": f"u{big}", "width": 1280, "height": 960, "file_size": size},
        ]
        api._messages[(chat_id, mid)] = msg
        return api._enqueue({"message": msg})


def push_document(
    api: Any,
    chat_id: int,
    data: bytes,
    *,
    file_name: str,
    mime_type: str,
    caption: str = "",
    sender_id: int = 1001,
    username: str = "alice",
    declared_size: int | None = None,
) -> JSON:
    """Queue a user's document (a file as sent, its name as the sender gave it); return the update."""
    chat_id = int(chat_id)
    with api._lock:
        mid, msg = _file_message(api, chat_id, caption, sender_id, username)
        fid = f"doc-{chat_id}-{mid}"
        api.files.add(fid, data, f"documents/file_{mid}")
        msg["document"] = {
            "file_id": fid, "file_unique_id": f"u{fid}", "file_name": file_name, "mime_type": mime_type,
            "file_size": len(data) if declared_size is None else declared_size,
        }  # fmt: skip
        api._messages[(chat_id, mid)] = msg
        return api._enqueue({"message": msg})


def push_voice(
    api: Any,
    chat_id: int,
    data: bytes,
    *,
    caption: str = "",
    sender_id: int = 1001,
    username: str = "alice",
    duration: int = 3,
) -> JSON:
    """Queue a user's voice note (OGG/Opus as Telegram records them) with an optional caption."""
    chat_id = int(chat_id)
    with api._lock:
        mid, msg = _file_message(api, chat_id, caption, sender_id, username)
        fid = f"voice-{chat_id}-{mid}"
        api.files.add(fid, data, f"voice/file_{mid}.oga")
        msg["voice"] = {
            "file_id": fid, "file_unique_id": f"u{fid}", "duration": duration, "mime_type": "audio/ogg",
            "file_size": len(data),
        }  # fmt: skip
        api._messages[(chat_id, mid)] = msg
        return api._enqueue({"message": msg})


def file_handler(api: Any) -> Any:
    """The aiohttp handler of ``GET /file/bot{token}/{path}``: the file's bytes, 401 for another token."""

    async def handle(request: web.Request) -> web.Response:
        token, path = request.match_info["token"], request.match_info["path"]
        found = None
        with api.files.lock:
            for stored in api.files.files.values():
                if stored.file_path == path:
                    found = stored
            status = 401 if token != api.token else (200 if found else 404)
            api.files.downloads.append({"path": path, "status": status, "token_ok": token == api.token})
        if status != 200 or found is None:
            return web.Response(status=status, text="Not Found" if status == 404 else "Unauthorized")
        return web.Response(body=found.data, content_type="application/octet-stream")

    return handle
