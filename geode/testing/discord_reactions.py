"""The reaction route of the local Discord server: ``PUT /channels/{id}/messages/{id}/reactions/{emoji}/@me``
(discord.py's ``add_reaction``), each reaction recorded for the tests (``reactions()``), and the delete of one
of the bot's messages (``DELETE /channels/{id}/messages/{id}``: gone from ``posts()`` and the history)."""

from __future__ import annotations

import urllib.parse
from typing import Any

from aiohttp import web

from geode.testing.discord_channels import ChannelRoutes
from geode.testing.discord_events import JSON
from geode.testing.discord_rest import ApiError, Handler


class ReactionRoutes(ChannelRoutes):
    """:class:`ChannelRoutes` plus the bot's own reactions on messages."""

    def __init__(self) -> None:
        super().__init__()
        self._reactions: list[JSON] = []

    def handlers(self) -> dict[str, Handler]:
        return {**super().handlers(), "add_reaction": self._add_reaction, "delete_message": self._delete}

    def reactions(self, channel_id: int | None = None) -> list[JSON]:
        """Each reaction the bot added, in order: ``{"channel_id", "message_id", "emoji"}`` (ints, text)."""
        with self._lock:
            return [dict(r) for r in self._reactions if channel_id is None or r["channel_id"] == channel_id]

    async def _add_reaction(self, request: web.Request, body: JSON) -> tuple[int, Any]:
        channel_id = self._channel(request)
        try:
            message_id = int(request.match_info["message_id"])
        except ValueError:
            raise ApiError(404, "Unknown Message", 10008) from None
        emoji = urllib.parse.unquote(request.match_info["emoji"])
        with self._lock:
            if (channel_id, message_id) not in self.messages:
                raise ApiError(404, "Unknown Message", 10008)
            if not emoji:
                raise ApiError(400, "Unknown Emoji", 10014)
            reaction = {"channel_id": channel_id, "message_id": message_id, "emoji": emoji}
            if reaction not in self._reactions:
                self._reactions.append(reaction)
        return 204, None

    async def _delete(self, request: web.Request, body: JSON) -> tuple[int, Any]:
        channel_id = self._channel(request)
        try:
            key = (channel_id, int(request.match_info["message_id"]))
        except ValueError:
            raise ApiError(404, "Unknown Message", 10008) from None
        with self._lock:
            msg = self.messages.get(key)
            if msg is None:
                raise ApiError(404, "Unknown Message", 10008)
            if msg["author"]["id"] != str(self.bot_id):
                raise ApiError(403, "Missing Permissions", 50013)
            del self.messages[key]
        return 204, None
