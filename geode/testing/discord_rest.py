"""The REST half of the local Discord server: ``/api/v10`` routes with Bot-token auth, injected failures
(429 with ``retry_after``), and the record of every call, post and interaction response for tests."""

from __future__ import annotations

import copy
import json
import math
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from geode.testing import discord_events as ev
from geode.testing.discord_events import JSON
from geode.testing.discord_uploads import FORM_FILES, DiscordUploads, FormError, read_form

MAX_CONTENT = 2000
MAX_CUSTOM_ID = 100
EPHEMERAL = 1 << 6
SUPPRESS_NOTIFICATIONS = 1 << 12  # a message posted without a notification (kept on the message)

# name -> (method, path under /api/v10); the names are what fail_next() and calls() take
ROUTES: dict[str, tuple[str, str]] = {
    "get_user": ("GET", "/users/@me"),
    "application_info": ("GET", "/oauth2/applications/@me"),
    "get_gateway": ("GET", "/gateway"),
    "get_bot_gateway": ("GET", "/gateway/bot"),
    "send_message": ("POST", "/channels/{channel_id}/messages"),
    "edit_message": ("PATCH", "/channels/{channel_id}/messages/{message_id}"),
    "delete_message": ("DELETE", "/channels/{channel_id}/messages/{message_id}"),  # discord_reactions
    "typing": ("POST", "/channels/{channel_id}/typing"),
    "interaction_callback": ("POST", "/interactions/{interaction_id}/{token}/callback"),
    "followup": ("POST", "/webhooks/{application_id}/{token}"),
    "get_channel": ("GET", "/channels/{channel_id}"),  # these two: discord_channels.ChannelRoutes
    "get_messages": ("GET", "/channels/{channel_id}/messages"),
    "add_reaction": ("PUT", "/channels/{channel_id}/messages/{message_id}/reactions/{emoji}/@me"),
}
Handler = Callable[[web.Request, JSON], Awaitable[tuple[int, Any]]]
_NO_AUTH = {"interaction_callback", "followup"}  # authorised by the interaction token in the path


def json_response(body: Any, status: int, headers: dict[str, str] | None = None) -> web.Response:
    """discord.py parses a body as JSON only if Content-Type is exactly ``application/json``."""
    return web.Response(
        body=json.dumps(body).encode(), status=status,
        headers={"Content-Type": "application/json", **(headers or {})},
    )  # fmt: skip


class ApiError(Exception):
    """An error response in Discord's shape: ``{"message", "code"[, "errors"]}``."""

    def __init__(self, status: int, message: str, code: int, *, retry_after: float | None = None,
                 errors: JSON | None = None) -> None:  # fmt: skip
        super().__init__(message)
        self.status, self.message, self.code = status, message, code
        self.retry_after, self.errors = retry_after, errors

    def response(self) -> web.Response:
        body: JSON = {"message": self.message, "code": self.code}
        headers: dict[str, str] = {}
        if self.errors:
            body["errors"] = self.errors
        if self.retry_after is not None:
            body.update(retry_after=self.retry_after, **{"global": False})
            # discord.py treats a 429 without a Via header as a Cloudflare ban (no retry, no retry_after)
            headers = {"Retry-After": str(math.ceil(self.retry_after)), "Via": "1.1 google",
                       "X-RateLimit-Scope": "user"}  # fmt: skip
        return json_response(body, self.status, headers)


def _invalid(field: str, code: str, message: str) -> ApiError:
    errors = {field: {"_errors": [{"code": code, "message": message}]}}
    return ApiError(400, "Invalid Form Body", 50035, errors=errors)


def _check_components(components: Any) -> None:
    if not isinstance(components, list) or len(components) > 5:
        raise _invalid("components", "BASE_TYPE_BAD_LENGTH", "Must be between 0 and 5 in length.")
    for row in components:
        if not isinstance(row, dict) or row.get("type") != 1 or len(row.get("components") or []) > 5:
            raise _invalid("components", "COMPONENT_LAYOUT_WIDTH_EXCEEDED", "Invalid action row.")
        for button in row["components"]:
            custom_id = button.get("custom_id")
            if button.get("type") == 2 and button.get("style") != 5:
                if not isinstance(custom_id, str) or not 1 <= len(custom_id) <= MAX_CUSTOM_ID:
                    raise _invalid(
                        "custom_id", "BASE_TYPE_BAD_LENGTH", "Must be between 1 and 100 in length."
                    )


@dataclass
class _Failure:
    status: int
    retry_after: float | None
    applied: bool  # the call takes effect, then its response is this error (a lost response)

    def error(self) -> ApiError:
        message = "You are being rate limited." if self.status == 429 else "Injected failure"
        return ApiError(self.status, message, 0, retry_after=self.retry_after)


class RestRoutes:
    """The REST state and handlers of :class:`~geode.testing.discord_server.LocalDiscord`."""

    token: str
    bot_id: int
    guild_id: int
    bot_name: str
    bot_user: JSON
    users: dict[int, JSON]
    ids: ev.Snowflakes
    uploads: DiscordUploads  # the files the bot attached (discord_uploads)

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.messages: dict[tuple[int, int], JSON] = {}  # (channel or thread id, message id) -> latest JSON
        self.interactions: dict[int, JSON] = {}  # id -> {"token", "message", "responded"}
        self._posts: list[tuple[int, int]] = []
        self._responses: list[JSON] = []
        self._calls: dict[str, list[JSON]] = {}
        self._failures: dict[str, list[_Failure]] = {}
        self._nonces: dict[tuple[int, str], int] = {}  # (channel, nonce) -> message id (enforce_nonce)

    @property
    def gateway_url(self) -> str:
        raise NotImplementedError

    def known_channel(self, channel_id: int) -> bool:
        raise NotImplementedError

    def guild_of(self, channel_id: int) -> int:
        raise NotImplementedError

    def posted(self, message: JSON) -> None:
        """Called on the server's loop after the bot posted ``message`` (the gateway echoes it)."""

    # -- the test API ----------------------------------------------------------------------------------
    def posts(self, channel_id: int | None = None) -> list[JSON]:
        """Every message the bot posted, in order, in its current state (edits applied): ``channel_id`` is
        the thread's id for a post in a thread; ``reply_to`` the referenced message id or None."""
        with self._lock:
            out = []
            for channel, mid in self._posts:
                if channel_id is not None and channel != int(channel_id):
                    continue
                msg = self.messages.get((channel, mid))
                if msg is None:  # deleted
                    continue
                out.append({
                    "channel_id": channel, "message_id": mid, "content": msg["content"],
                    "reply_to": (msg.get("message_reference") or {}).get("message_id"),
                    "components": msg["components"], "edited": msg["edited_timestamp"] is not None,
                    "ephemeral": bool(msg["flags"] & EPHEMERAL),
                    "silent": bool(msg["flags"] & SUPPRESS_NOTIFICATIONS),
                })  # fmt: skip
            return copy.deepcopy(out)

    def interaction_responses(self) -> list[JSON]:
        """Each interaction callback and follow-up accepted, in order: ``{"interaction_id", "type", "data"}``
        (``type`` the callback type: 4 message, 6 deferred update, 7 update; ``"followup"`` a follow-up)."""
        with self._lock:
            return copy.deepcopy(self._responses)

    def calls(self, route: str) -> list[JSON]:
        """Each call of ``route`` (a name in ``ROUTES``): ``{"path", "json", "status", "at" (monotonic)}``."""
        with self._lock:
            return copy.deepcopy(self._calls.get(route, []))

    def fail_next(
        self, route: str, *, status: int = 429, retry_after: float = 1, count: int = 1, applied: bool = False
    ) -> None:
        """The next ``count`` calls of ``route`` answer ``status`` (a 429 carries ``retry_after`` in the body
        and ``Retry-After``; discord.py sleeps and retries up to ``max_ratelimit_timeout``, else raises).
        ``applied``: the call takes effect first (a message is posted) and only its response is the error;
        discord.py retries a 500/502/504 by itself."""
        if route not in ROUTES:
            raise ValueError(f"unknown route {route!r}; one of {sorted(ROUTES)}")
        with self._lock:
            self._failures.setdefault(route, []).extend(
                _Failure(status, retry_after if status == 429 else None, applied) for _ in range(count)
            )

    # -- HTTP ------------------------------------------------------------------------------------------
    def handlers(self) -> dict[str, Handler]:
        """The handler of each route in ``ROUTES`` this class serves (a subclass adds its own)."""
        return {
            "get_user": self._get_user, "application_info": self._application,
            "get_gateway": self._get_gateway, "get_bot_gateway": self._get_gateway,
            "send_message": self._send_message, "edit_message": self._edit_message,
            "typing": self._typing, "interaction_callback": self._interaction_callback,
            "followup": self._followup,
        }  # fmt: skip

    def add_rest_routes(self, app: web.Application, prefix: str) -> None:
        for name, handler in self.handlers().items():
            method, path = ROUTES[name]
            app.router.add_route(method, prefix + path, self._wrap(name, handler))
        app.router.add_route("*", prefix + "/{tail:.*}", self._not_found)

    async def _not_found(self, request: web.Request) -> web.Response:
        return ApiError(404, "404: Not Found", 0).response()

    def _wrap(self, name: str, handler: Handler) -> Callable[[web.Request], Awaitable[web.Response]]:
        async def handle(request: web.Request) -> web.Response:
            at = time.monotonic()
            body: JSON = {}
            try:
                if request.can_read_body and request.content_type == "multipart/form-data":
                    body = await read_form(request)  # a message with files: payload_json, files[n]
                elif request.can_read_body:
                    if request.content_type != "application/json":
                        raise ApiError(400, "Cannot send an empty message", 50006)
                    loaded = await request.json()
                    body = loaded if isinstance(loaded, dict) else {}
                if name not in _NO_AUTH and request.headers.get("Authorization") != f"Bot {self.token}":
                    raise ApiError(401, "401: Unauthorized", 0)
                with self._lock:
                    failures = self._failures.get(name)
                    failure = failures.pop(0) if failures else None
                if failure is not None and not failure.applied:
                    raise failure.error()
                status, result = await handler(request, body)
                if failure is not None:
                    raise failure.error()
                response = json_response(result, status) if status != 204 else web.Response(status=204)
            except FormError as exc:  # a multipart body refused (discord_uploads)
                status, response = exc.status, ApiError(exc.status, str(exc), exc.code).response()
            except ApiError as exc:
                status, response = exc.status, exc.response()
            with self._lock:
                self._calls.setdefault(name, []).append(
                    {"path": request.path, "json": body, "status": status, "at": at}
                )
            return response

        return handle

    async def _get_user(self, request: web.Request, body: JSON) -> tuple[int, Any]:
        return 200, self.bot_user

    async def _application(self, request: web.Request, body: JSON) -> tuple[int, Any]:
        owner = ev.user_json(self.bot_id + 1, "owner")
        return 200, ev.application_json(self.bot_id, self.bot_name, owner)

    async def _get_gateway(self, request: web.Request, body: JSON) -> tuple[int, Any]:
        limit = {"total": 1000, "remaining": 1000, "reset_after": 0, "max_concurrency": 1}
        return 200, {"url": self.gateway_url, "shards": 1, "session_start_limit": limit}

    async def _typing(self, request: web.Request, body: JSON) -> tuple[int, Any]:
        self._channel(request)
        return 204, None

    def _channel(self, request: web.Request) -> int:
        try:
            channel_id = int(request.match_info["channel_id"])
        except ValueError:
            raise _invalid("channel_id", "NUMBER_TYPE_COERCE", "Value is not snowflake.") from None
        if not self.known_channel(channel_id):
            raise ApiError(404, "Unknown Channel", 10003)
        return channel_id

    async def _send_message(self, request: web.Request, body: JSON) -> tuple[int, Any]:
        channel_id = self._channel(request)
        content, components = body.get("content") or "", body.get("components") or []
        if not isinstance(content, str) or len(content) > MAX_CONTENT:
            raise _invalid("content", "BASE_TYPE_MAX_LENGTH", "Must be 2000 or fewer in length.")
        _check_components(components)
        if not content and not components and not request.get(FORM_FILES):
            raise ApiError(400, "Cannot send an empty message", 50006)
        nonce = str(body["nonce"]) if body.get("nonce") is not None else ""
        with self._lock:
            if nonce and body.get("enforce_nonce") and (channel_id, nonce) in self._nonces:
                return 200, copy.deepcopy(self.messages[(channel_id, self._nonces[(channel_id, nonce)])])
            reference, referenced = None, None
            ref = body.get("message_reference")
            if isinstance(ref, dict) and ref.get("message_id") is not None:
                ref_channel = int(ref.get("channel_id") or channel_id)
                referenced = self.messages.get((ref_channel, int(ref["message_id"])))
                if referenced is None or ref_channel != channel_id:
                    if ref.get("fail_if_not_exists", True):
                        raise _invalid("message_reference", "MESSAGE_REFERENCE_UNKNOWN_MESSAGE",
                                       "Unknown message")  # fmt: skip
                    referenced = None
                if referenced is not None:
                    reference = {"type": 0, "message_id": referenced["id"], "channel_id": str(channel_id),
                                 "guild_id": referenced.get("guild_id")}  # fmt: skip
            silent = int(body.get("flags") or 0) & SUPPRESS_NOTIFICATIONS
            msg = self._bot_message(channel_id, content, components, reference, silent)
            self.uploads.attach(request, msg, self.ids)
            if nonce:
                msg["nonce"] = body["nonce"]  # echoed, as Discord does
                self._nonces[(channel_id, nonce)] = int(msg["id"])
            if referenced is not None:
                msg = {**msg, "referenced_message": copy.deepcopy(referenced)}
            self._posts.append((channel_id, int(msg["id"])))
        self.posted(msg)
        return 200, copy.deepcopy(msg)

    def _bot_message(self, channel_id: int, content: str, components: list[JSON], reference: JSON | None,
                     flags: int = 0) -> JSON:  # with the lock held  # fmt: skip
        msg = ev.message_json(
            message_id=self.ids.next(), channel_id=channel_id, guild_id=self.guild_of(channel_id),
            author=self.users[self.bot_id], content=content, components=components, reference=reference,
        )  # fmt: skip
        msg["flags"] = flags
        self.messages[(channel_id, int(msg["id"]))] = msg
        return msg

    async def _edit_message(self, request: web.Request, body: JSON) -> tuple[int, Any]:
        channel_id = self._channel(request)
        with self._lock:
            msg = self.messages.get((channel_id, int(request.match_info["message_id"])))
            if msg is None:
                raise ApiError(404, "Unknown Message", 10008)
            if msg["author"]["id"] != str(self.bot_id):
                raise ApiError(403, "Cannot edit a message authored by another user", 50005)
            self._apply_edit(msg, body)
            return 200, copy.deepcopy(msg)

    @staticmethod
    def _apply_edit(msg: JSON, body: JSON) -> None:  # with the lock held
        content = body.get("content")
        if content is not None:
            if not isinstance(content, str) or len(content) > MAX_CONTENT:
                raise _invalid("content", "BASE_TYPE_MAX_LENGTH", "Must be 2000 or fewer in length.")
            msg["content"] = content
        if body.get("components") is not None:
            _check_components(body["components"])
            msg["components"] = body["components"]
        msg["edited_timestamp"] = ev.timestamp()

    async def _interaction_callback(self, request: web.Request, body: JSON) -> tuple[int, Any]:
        interaction_id = int(request.match_info["interaction_id"])
        kind, data = body.get("type"), body.get("data") or {}
        with self._lock:
            known = self.interactions.get(interaction_id)
            if known is None or known["token"] != request.match_info["token"]:
                raise ApiError(404, "Unknown interaction", 10062)
            if known.get("responded"):
                raise ApiError(400, "Interaction has already been acknowledged.", 40060)
            pressed: JSON = known["message"]
            channel_id = int(pressed["channel_id"])
            resource: JSON | None = None
            if kind == ev.RESPONSE_MESSAGE:
                content = data.get("content") or ""
                if not content or len(content) > MAX_CONTENT:
                    raise _invalid("data.content", "BASE_TYPE_BAD_LENGTH", "Must be 1 to 2000 in length.")
                flags = int(data.get("flags") or 0) & EPHEMERAL
                resource = self._bot_message(channel_id, content, data.get("components") or [], None, flags)
            elif kind == ev.RESPONSE_UPDATE_MESSAGE:
                self._apply_edit(pressed, data)
                resource = pressed
            elif kind != ev.RESPONSE_DEFERRED_UPDATE:
                raise _invalid("type", "BASE_TYPE_CHOICES", f"Value must be one of (4, 6, 7), not {kind}.")
            known["responded"] = True
            self._responses.append({"interaction_id": interaction_id, "type": kind, "data": data})
        if "with_response" not in request.query:
            return 204, None
        ephemeral = bool(resource and resource["flags"] & EPHEMERAL)
        result: JSON = {"interaction": {"id": str(interaction_id), "type": ev.INTERACTION_COMPONENT,
                                        "response_message_loading": False,
                                        "response_message_ephemeral": ephemeral}}  # fmt: skip
        if resource is not None:
            result["interaction"]["response_message_id"] = resource["id"]
            result["resource"] = {"type": kind, "message": copy.deepcopy(resource)}
        return 200, result

    async def _followup(self, request: web.Request, body: JSON) -> tuple[int, Any]:
        """A follow-up message of an interaction already responded to (``interaction.followup.send``)."""
        token = request.match_info["token"]
        content = body.get("content") or ""
        if not isinstance(content, str) or not content or len(content) > MAX_CONTENT:
            raise _invalid("content", "BASE_TYPE_BAD_LENGTH", "Must be 1 to 2000 in length.")
        with self._lock:
            found = [(i, k) for i, k in self.interactions.items() if k["token"] == token]
            if not found or not found[0][1].get("responded"):
                raise ApiError(404, "Unknown Webhook", 10015)
            interaction_id, known = found[0]
            channel_id = int(known["message"]["channel_id"])
            flags = int(body.get("flags") or 0) & EPHEMERAL
            msg = self._bot_message(channel_id, content, body.get("components") or [], None, flags)
            self._responses.append({"interaction_id": interaction_id, "type": "followup", "data": body})
        return (200, msg) if request.query.get("wait") in ("1", "true") else (204, None)
