"""JSON payload builders of the Discord API v10 wire format (users, guilds, channels, messages, interactions,
gateway frames) for the local Discord server: shaped as discord.py 2.7 parses them."""

from __future__ import annotations

import itertools
import json
import threading
import time
from datetime import UTC, datetime
from typing import Any

JSON = dict[str, Any]

DISCORD_EPOCH_MS = 1_420_070_400_000
API_VERSION = 10

# gateway opcodes
OP_DISPATCH, OP_HEARTBEAT, OP_IDENTIFY, OP_RESUME = 0, 1, 2, 6
OP_RECONNECT, OP_INVALID_SESSION, OP_HELLO, OP_HEARTBEAT_ACK = 7, 9, 10, 11

CHANNEL_TEXT, CHANNEL_PUBLIC_THREAD = 0, 11
MESSAGE_DEFAULT, MESSAGE_REPLY = 0, 19
INTERACTION_COMPONENT = 3
RESPONSE_MESSAGE, RESPONSE_DEFERRED_UPDATE, RESPONSE_UPDATE_MESSAGE = 4, 6, 7
ALL_PERMISSIONS = str((1 << 50) - 1)


class Snowflakes:
    """Increasing Discord snowflakes (a millisecond timestamp since 2015 and a counter), thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counter = itertools.count()
        self._last = 0

    def next(self) -> int:
        with self._lock:
            ms = int(time.time() * 1000) - DISCORD_EPOCH_MS
            value = (ms << 22) | (next(self._counter) & 0xFFF)
            self._last = max(self._last + 1, value)
            return self._last


def timestamp() -> str:
    return datetime.now(UTC).isoformat()


def user_json(user_id: int, username: str, *, bot: bool = False) -> JSON:
    return {
        "id": str(user_id),
        "username": username,
        "discriminator": "0",
        "global_name": username,
        "avatar": None,
        "bot": bot,
        "public_flags": 0,
    }


def self_user_json(user_id: int, username: str) -> JSON:
    """``GET /users/@me`` and the READY ``user``."""
    return {**user_json(user_id, username, bot=True), "verified": True, "mfa_enabled": False, "flags": 0}


def application_json(app_id: int, name: str, owner: JSON) -> JSON:
    """``GET /oauth2/applications/@me`` (discord.py's ``Client.login`` reads it)."""
    return {
        "id": str(app_id),
        "name": name,
        "description": "",
        "icon": None,
        "bot_public": False,
        "bot_require_code_grant": False,
        "owner": owner,
        "verify_key": "0" * 64,
        "flags": 0,
        "summary": "",
        "team": None,
    }


def member_json(user: JSON, *, joined_at: str) -> JSON:
    return {"user": user, "roles": [], "joined_at": joined_at, "deaf": False, "mute": False, "flags": 0}


def text_channel_json(channel_id: int, guild_id: int, name: str, position: int) -> JSON:
    return {
        "id": str(channel_id),
        "type": CHANNEL_TEXT,
        "guild_id": str(guild_id),
        "name": name,
        "position": position,
        "permission_overwrites": [],
        "nsfw": False,
        "topic": None,
        "last_message_id": None,
        "rate_limit_per_user": 0,
        "parent_id": None,
    }


def thread_json(thread_id: int, parent_id: int, guild_id: int, owner_id: int, name: str) -> JSON:
    return {
        "id": str(thread_id),
        "type": CHANNEL_PUBLIC_THREAD,
        "guild_id": str(guild_id),
        "parent_id": str(parent_id),
        "owner_id": str(owner_id),
        "name": name,
        "last_message_id": None,
        "rate_limit_per_user": 0,
        "message_count": 0,
        "member_count": 1,
        "total_message_sent": 0,
        "flags": 0,
        "thread_metadata": {
            "archived": False,
            "auto_archive_duration": 1440,
            "archive_timestamp": timestamp(),
            "locked": False,
        },
    }


def guild_json(guild_id: int, name: str, *, owner_id: int, channels: list[JSON], threads: list[JSON],
               members: list[JSON]) -> JSON:  # fmt: skip
    """The GUILD_CREATE payload of a guild the bot is in (one @everyone role with every permission)."""
    everyone = {
        "id": str(guild_id),
        "name": "@everyone",
        "permissions": ALL_PERMISSIONS,
        "position": 0,
        "color": 0,
        "hoist": False,
        "managed": False,
        "mentionable": False,
        "flags": 0,
    }
    return {
        "id": str(guild_id),
        "name": name,
        "icon": None,
        "owner_id": str(owner_id),
        "unavailable": False,
        "large": False,
        "member_count": len(members),
        "joined_at": timestamp(),
        "roles": [everyone],
        "emojis": [],
        "stickers": [],
        "features": [],
        "channels": channels,
        "threads": threads,
        "members": members,
        "presences": [],
        "voice_states": [],
        "stage_instances": [],
        "guild_scheduled_events": [],
        "soundboard_sounds": [],
        "verification_level": 0,
        "default_message_notifications": 0,
        "explicit_content_filter": 0,
        "mfa_level": 0,
        "premium_tier": 0,
        "preferred_locale": "en-US",
        "nsfw_level": 0,
    }


def message_json(
    *,
    message_id: int,
    channel_id: int,
    guild_id: int | None,
    author: JSON,
    content: str,
    mentions: list[JSON] | None = None,
    reference: JSON | None = None,
    components: list[JSON] | None = None,
    edited_timestamp: str | None = None,
    joined_at: str = "",
) -> JSON:
    """A message object as MESSAGE_CREATE dispatches it and ``POST /channels/{id}/messages`` returns it."""
    msg: JSON = {
        "id": str(message_id),
        "type": MESSAGE_REPLY if reference else MESSAGE_DEFAULT,
        "channel_id": str(channel_id),
        "author": author,
        "content": content,
        "timestamp": timestamp(),
        "edited_timestamp": edited_timestamp,
        "tts": False,
        "mention_everyone": False,
        "mentions": mentions or [],
        "mention_roles": [],
        "attachments": [],
        "embeds": [],
        "pinned": False,
        "flags": 0,
        "components": components or [],
    }
    if guild_id is not None:
        msg["guild_id"] = str(guild_id)
        if not author.get("bot"):
            msg["member"] = {k: v for k, v in member_json(author, joined_at=joined_at).items() if k != "user"}
    if reference:
        msg["message_reference"] = reference
    return msg


def interaction_json(
    *,
    interaction_id: int,
    application_id: int,
    token: str,
    guild_id: int,
    channel: JSON,
    member: JSON,
    message: JSON,
    custom_id: str,
) -> JSON:
    """INTERACTION_CREATE for a button press (type 3, component type 2) on ``message``."""
    return {
        "id": str(interaction_id),
        "application_id": str(application_id),
        "type": INTERACTION_COMPONENT,
        "data": {"custom_id": custom_id, "component_type": 2},
        "guild_id": str(guild_id),
        "channel_id": channel["id"],
        "channel": channel,
        "member": {**member, "permissions": ALL_PERMISSIONS},
        "token": token,
        "version": 1,
        "message": message,
        "app_permissions": ALL_PERMISSIONS,
        "locale": "en-US",
        "guild_locale": "en-US",
        "entitlements": [],
        "authorizing_integration_owners": {"0": str(guild_id)},
        "context": 0,
        "attachment_size_limit": 10 * 1024 * 1024,
    }


def dumps(payload: JSON) -> str:
    return json.dumps(payload, separators=(",", ":"))


def loads(text: str) -> JSON | None:
    """A gateway frame from the client, or None if it is not a JSON object."""
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def hello(heartbeat_interval_ms: int) -> JSON:
    return {"op": OP_HELLO, "d": {"heartbeat_interval": heartbeat_interval_ms}, "s": None, "t": None}


def dispatch(event: str, seq: int, data: JSON) -> JSON:
    return {"op": OP_DISPATCH, "t": event, "s": seq, "d": data}


def ready(*, user: JSON, guild_ids: list[int], session_id: str, resume_url: str, app_id: int) -> JSON:
    """The READY dispatch body: guilds start unavailable; each arrives in its own GUILD_CREATE."""
    return {
        "v": API_VERSION,
        "user": user,
        "guilds": [{"id": str(g), "unavailable": True} for g in guild_ids],
        "session_id": session_id,
        "session_type": "normal",
        "resume_gateway_url": resume_url,
        "application": {"id": str(app_id), "flags": 0},
        "private_channels": [],
        "relationships": [],
        "user_settings": {},
        "presences": [],
        "geo_ordered_rtc_regions": [],
        "guild_join_requests": [],
        "_trace": ["geode-local-discord"],
    }
