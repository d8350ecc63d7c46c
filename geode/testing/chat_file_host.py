"""The file host of the local Slack and Discord servers: a user's shared file kept under a URL path of the
server (Slack's ``url_private`` ``/files-pri/...``, Discord's CDN ``/attachments/...``) and served there.
Every download is recorded (path, status, the ``Authorization`` header sent or not) so a test sees what was
fetched and that a token went, or did not go, with it."""

from __future__ import annotations

import copy
import threading
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

JSON = dict[str, Any]


@dataclass
class ChatFileHost:
    """Files by URL path (as sent: percent-encoded); ``token`` (Slack's bot token) is required as a Bearer
    header when set."""

    token: str = ""
    files: dict[str, bytes] = field(default_factory=dict)
    downloads: list[JSON] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, path: str, data: bytes) -> None:
        with self.lock:
            self.files[path] = data

    def downloaded(self) -> list[JSON]:
        """Each download asked for: ``{"path", "status", "authorization"}`` (the header as sent, "" none)."""
        with self.lock:
            return copy.deepcopy(self.downloads)

    def route(self, app: web.Application, prefix: str) -> None:
        """Serve ``GET <prefix>/{path}`` (e.g. ``/files-pri``)."""
        app.router.add_get(prefix + "/{path:.*}", self._handle)

    async def _handle(self, request: web.Request) -> web.Response:
        path, auth = request.raw_path, request.headers.get("Authorization", "")
        with self.lock:
            data = self.files.get(path)
            status = 404 if data is None else 200
            if self.token and auth != f"Bearer {self.token}":
                status = 403  # Slack answers a private file without the bot token with a login page
            self.downloads.append({"path": path, "status": status, "authorization": auth})
        if status != 200 or data is None:
            return web.Response(status=status, text="no such file" if status == 404 else "forbidden")
        return web.Response(body=data, content_type="application/octet-stream")
