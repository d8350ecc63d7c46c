"""Uploads on the local Discord server, as discord.py sends a message with files: a multipart
``POST /channels/{id}/messages`` (``payload_json`` the message, ``files[n]`` the files). The message gets its
attachments (served on this server's CDN path, ``/attachments/...``) and every upload is recorded — channel,
message id, file name, the message's content, the bytes — so a test sees what the bot posted and how often."""

from __future__ import annotations

import copy
import json
import threading
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

from aiohttp import web

from geode.testing.chat_file_host import ChatFileHost
from geode.testing.discord_events import JSON, Snowflakes

MAX_UPLOAD_BYTES = 10 * 1024 * 1024  # Discord's limit for a bot's files in a server without boosts
FORM_FILES = web.RequestKey("discord_files", list[tuple[str, bytes]])  # a request's files[n] parts


class FormError(ValueError):
    """A multipart body the server refuses: ``status`` and Discord's error ``code``."""

    def __init__(self, message: str, status: int = 400, code: int = 50035) -> None:
        super().__init__(message)
        self.status, self.code = status, code


async def read_form(request: web.Request) -> JSON:
    """A multipart body: its ``payload_json`` (the message); ``files[n]`` go to ``request[FORM_FILES]``."""
    form = await request.post()
    payload: Any = {}
    files: list[tuple[str, bytes]] = []
    for name, value in form.items():
        if name == "payload_json" and isinstance(value, str):
            try:
                payload = json.loads(value)
            except ValueError:
                raise FormError("Invalid Form Body: payload_json is not JSON") from None
        elif name.startswith("files[") and isinstance(value, web.FileField):
            files.append((value.filename, value.file.read()))
    if not isinstance(payload, dict):
        raise FormError("Invalid Form Body: payload_json is not an object")
    if sum(len(data) for _name, data in files) > MAX_UPLOAD_BYTES:
        raise FormError("Request entity too large", 413, 40005)
    request[FORM_FILES] = files
    return payload


@dataclass
class DiscordUploads:
    """Every file the bot attached, in order: ``{"channel_id", "message_id", "filename", "content", "data"}``;
    each one served at its attachment URL by ``host``."""

    host: ChatFileHost
    items: list[JSON] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def of(self, channel_id: int | None = None) -> list[JSON]:
        with self.lock:
            return copy.deepcopy([u for u in self.items if channel_id in (None, u["channel_id"])])

    def attach(self, request: web.Request, msg: JSON, ids: Snowflakes) -> None:
        """Give the bot's new message ``msg`` the request's files as attachments and record them."""
        channel = int(msg["channel_id"])
        for filename, data in request.get(FORM_FILES) or []:
            aid = str(ids.next())
            path = f"/attachments/{channel}/{aid}/{quote(filename, safe='')}"
            self.host.add(path, data)
            url = f"{request.scheme}://{request.host}{path}"
            msg["attachments"].append({
                "id": aid, "filename": filename, "size": len(data), "url": url, "proxy_url": url,
                "content_type": "application/octet-stream",
            })  # fmt: skip
            with self.lock:
                self.items.append({
                    "channel_id": channel, "message_id": int(msg["id"]), "filename": filename,
                    "content": msg["content"], "data": data,
                })  # fmt: skip
