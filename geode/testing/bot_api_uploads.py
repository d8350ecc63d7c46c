"""Uploads on the local Bot API server: ``sendDocument`` (multipart, the file in the ``document`` field as
Telegram's bots send it) posts a document message in the chat and records the upload — chat, message id,
file name, caption, the bytes — so a test sees what the bot posted and how many times."""

from __future__ import annotations

import hashlib
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from geode.testing import bot_api_wire as wire
from geode.testing.bot_api_methods import ApiError, BotApi
from geode.testing.bot_api_wire import JSON

MAX_UPLOAD_BYTES = 50 * 1024 * 1024  # the Bot API's limit for a bot's upload
FILES = web.RequestKey("files", dict[str, tuple[str, bytes]])  # a request's uploaded files (form_files)


@dataclass
class Uploads:
    """Every accepted upload, in order: ``{"chat_id", "message_id", "filename", "caption", "data"}``."""

    items: list[JSON] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def of(self, chat_id: int | None = None) -> list[JSON]:
        with self.lock:
            return [dict(u) for u in self.items if chat_id is None or u["chat_id"] == int(chat_id)]


def form_files(form: Any) -> dict[str, tuple[str, bytes]]:
    """The multipart form's file fields, by field name: (file name, bytes)."""
    return {k: (v.filename, v.file.read()) for k, v in form.items() if isinstance(v, web.FileField)}


def send_document(api: BotApi, uploads: Uploads, p: JSON, files: dict[str, tuple[str, bytes]]) -> JSON:
    """sendDocument with the file uploaded in the request (a file id or URL is not supported here)."""
    try:
        chat_id = int(p.get("chat_id", ""))
    except ValueError:
        raise ApiError(400, "Bad Request: chat not found") from None
    field_name = str(p.get("document") or "document").removeprefix("attach://")
    if field_name not in files:
        raise ApiError(400, "Bad Request: there is no document in the request")
    filename, data = files[field_name]
    if not data:
        raise ApiError(400, "Bad Request: file must be non-empty")
    if len(data) > MAX_UPLOAD_BYTES:
        raise ApiError(413, "Request Entity Too Large")
    thread = p.get("message_thread_id")
    thread_id = int(thread) if thread else None
    caption = str(p.get("caption") or "")
    mid = api._message_id(chat_id)
    msg = wire.message_json(
        message_id=mid, sender=api.bot_user, chat=wire.chat_json(chat_id, forum=thread_id is not None),
        date=int(time.time()), text="", thread_id=thread_id,
    )  # fmt: skip
    del msg["text"]
    unique = hashlib.sha256(data).hexdigest()[:16]
    msg["document"] = {"file_id": f"up-{chat_id}-{mid}", "file_unique_id": unique, "file_name": filename,
                       "file_size": len(data)}  # fmt: skip
    if caption:
        msg["caption"] = caption
    api._messages[(chat_id, mid)] = msg
    with uploads.lock:
        uploads.items.append(
            {"chat_id": chat_id, "message_id": mid, "filename": filename, "caption": caption, "data": data}
        )
    return msg
