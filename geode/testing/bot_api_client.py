"""A client for the local Bot API server's ``/_local/...`` test API, for a process that did not start the
server (the demo, a tree test): the same calls as ``LocalBotApi``'s Python test API, over HTTP."""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

JSON = dict[str, Any]


class LocalBotApiClient:
    """``LocalBotApiClient("http://127.0.0.1:8081")`` (the server's root URL, without ``/bot``)."""

    def __init__(self, url: str, *, timeout_s: float = 10.0) -> None:
        self.url, self.timeout_s = url.rstrip("/"), timeout_s

    def push_message(self, chat_id: int, text: str, **kwargs: Any) -> JSON:
        """kwargs as ``LocalBotApi.push_message``: sender_id, username, thread_id, reply_to_bot, ..."""
        return self._call("push_message", {"chat_id": chat_id, "text": text, **kwargs})

    def push_callback(self, chat_id: int, message_id: int, data: str, **kwargs: Any) -> JSON:
        return self._call(
            "push_callback", {"chat_id": chat_id, "message_id": message_id, "data": data, **kwargs}
        )

    def push_update(self, update: JSON, *, new_id: bool = True) -> JSON:
        return self._call("push_update", {"update": update, "new_id": new_id})

    def fail_next(self, method: str, **kwargs: Any) -> None:
        self._call("fail_next", {"method": method, **kwargs})

    def posts(self, chat_id: int | None = None) -> list[JSON]:
        return self._call("posts", query={} if chat_id is None else {"chat_id": chat_id})

    def actions(self, chat_id: int | None = None) -> list[JSON]:
        return self._call("actions", query={} if chat_id is None else {"chat_id": chat_id})

    def calls(self, method: str) -> list[JSON]:
        return self._call("calls", query={"method": method})

    def info(self) -> JSON:
        return self._call("info")

    def _call(self, name: str, body: JSON | None = None, *, query: JSON | None = None) -> Any:
        url = f"{self.url}/_local/{name}"
        if query:
            url += "?" + urllib.parse.urlencode(query)
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(url, data=data, method="GET" if data is None else "POST")
        req.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:
                envelope = json.loads(resp.read())
        except urllib.error.HTTPError as exc:
            with exc:
                envelope = json.loads(exc.read())
        if not envelope.get("ok"):
            raise RuntimeError(f"local Bot API {name}: {envelope.get('description')}")
        return envelope["result"]
