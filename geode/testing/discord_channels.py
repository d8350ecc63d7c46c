"""The channel-reading REST routes of the local Discord server: ``GET /channels/{id}`` and a channel's (or
thread's) message history by ``after`` / ``before`` / ``limit``, paged as Discord pages it (newest first)."""

from __future__ import annotations

import copy
from typing import Any

from aiohttp import web

from geode.testing.discord_events import JSON
from geode.testing.discord_rest import EPHEMERAL, ApiError, Handler, RestRoutes

MAX_PAGE = 100
DEFAULT_PAGE = 50


def _bad_query(field: str, message: str) -> ApiError:
    errors = {field: {"_errors": [{"code": "NUMBER_TYPE_COERCE", "message": message}]}}
    return ApiError(400, "Invalid Form Body", 50035, errors=errors)


def _snowflake(query: Any, field: str) -> int | None:
    raw = query.get(field)
    if raw is None:
        return None
    try:
        return int(raw)
    except ValueError:
        raise _bad_query(field, f"Value {raw!r} is not snowflake.") from None


class ChannelRoutes(RestRoutes):
    """:class:`RestRoutes` plus reading channels: what discord.py's ``fetch_channel`` and
    ``Messageable.history`` call."""

    def _channel_json(self, channel_id: int) -> JSON:
        raise NotImplementedError

    def handlers(self) -> dict[str, Handler]:
        return {**super().handlers(), "get_channel": self._get_channel, "get_messages": self._get_messages}

    async def _get_channel(self, request: web.Request, body: JSON) -> tuple[int, Any]:
        return 200, self._channel_json(self._channel(request))

    async def _get_messages(self, request: web.Request, body: JSON) -> tuple[int, Any]:
        """Up to ``limit`` (1 to 100, default 50) messages of the channel: the oldest ones after ``after``,
        the newest ones before ``before`` (or of all), always newest first; ephemeral ones are nobody's
        history; a reply carries its ``referenced_message``, as Discord sends it."""
        channel_id = self._channel(request)
        after, before = _snowflake(request.query, "after"), _snowflake(request.query, "before")
        try:
            limit = int(request.query.get("limit", DEFAULT_PAGE))
        except ValueError:
            raise _bad_query("limit", "Value is not int.") from None
        if not 1 <= limit <= MAX_PAGE:
            raise _bad_query("limit", f"int value should be between 1 and {MAX_PAGE}.")
        with self._lock:
            ids = sorted(
                mid
                for (channel, mid), msg in self.messages.items()
                if channel == channel_id
                and not msg["flags"] & EPHEMERAL
                and (after is None or mid > after)
                and (before is None or mid < before)
            )
            page = ids[:limit] if after is not None and before is None else ids[-limit:]
            out = []
            for mid in reversed(page):
                msg = copy.deepcopy(self.messages[(channel_id, mid)])
                ref = msg.get("message_reference")
                if ref is not None:
                    referenced = self.messages.get((channel_id, int(ref["message_id"])))
                    msg["referenced_message"] = copy.deepcopy(referenced)
                out.append(msg)
        return 200, out
