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
    """Files by URL path (as sent: percent-encoded); when ``token`` (Slack's bot token) is set, a request
    without it as a Bearer header gets a sign-in page instead of the file, as Slack answers."""

    token: str = ""
    files: dict[str, bytes] = field(default_factory=dict)
    downloads: list[JSON] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, path: str, data: bytes) -> None:
        with self.lock:
            self.files[path] = data

    def downloaded(self) -> list[JSON]:
        """Each download asked for: ``{"path", "status", "authorization", "signin"}`` (the header as sent, ""
        none; ``signin``: answered with the sign-in page, a wrong or missing token)."""
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
            signin = bool(self.token) and auth != f"Bearer {self.token}"
            self.downloads.append({"path": path, "status": status, "authorization": auth, "signin": signin})
        if signin:  # as Slack answers a private file without the right token: 200 and its sign-in page
            return web.Response(text="<html><body>Sign in to Slack</body></html>", content_type="text/html")
        if status != 200 or data is None:
            return web.Response(status=status, text="no such file")
        return web.Response(body=data, content_type="application/octet-stream")
