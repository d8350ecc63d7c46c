"""The JSON that a local Slack server sends and checks: Socket Mode frames (hello, events_api and interactive
envelopes, disconnect), message objects, and the Block Kit limits chat.postMessage enforces."""

from __future__ import annotations

import copy
import itertools
import re
import time
import uuid
from typing import Any

JSON = dict[str, Any]

TEAM_ID = "T0GEODE01"
APP_ID = "A0GEODE01"
MAX_TEXT = 40_000  # chat.postMessage: longer text is refused with msg_too_long
MAX_SECTION_TEXT = 3_000  # a section block's text
MAX_BUTTON_VALUE = 2_000
MAX_BLOCKS = 50
CHANNEL_ID = re.compile(r"^[CGD][A-Z0-9]{2,31}$")


class SlackError(Exception):
    """A Web API refusal: ``{"ok": false, "error": error}`` with HTTP ``status`` (and ``Retry-After``)."""

    def __init__(self, error: str, *, status: int = 200, retry_after: int | None = None) -> None:
        super().__init__(error)
        self.error, self.status, self.retry_after = error, status, retry_after

    def body(self) -> JSON:
        return {"ok": False, "error": self.error}


class Clock:
    """Message timestamps (``"1733220000.000123"``, unique and increasing) and event / envelope ids."""

    def __init__(self) -> None:
        self._seq = itertools.count(1)
        self._last = 0

    def ts(self) -> str:
        micros = max(int(time.time() * 1_000_000), self._last + 1)
        self._last = micros
        return f"{micros // 1_000_000}.{micros % 1_000_000:06d}"

    def event_id(self) -> str:
        return f"Ev{next(self._seq):010d}"

    @staticmethod
    def envelope_id() -> str:
        return str(uuid.uuid4())

    @staticmethod
    def ticket() -> str:
        return uuid.uuid4().hex


def hello(num_connections: int) -> JSON:
    return {
        "type": "hello",
        "num_connections": num_connections,
        "debug_info": {"host": "applink-local", "build_number": 1, "approximate_connection_time": 3600},
        "connection_info": {"app_id": APP_ID},
    }


def disconnect(reason: str) -> JSON:
    return {"type": "disconnect", "reason": reason, "debug_info": {"host": "applink-local"}}


def user_message(
    *, channel: str, user: str, text: str, ts: str, thread_ts: str | None, channel_type: str = "channel"
) -> JSON:
    """A message event as a human posts it (``thread_ts`` only on a reply in a thread)."""
    msg: JSON = {
        "type": "message",
        "channel": channel,
        "user": user,
        "text": text,
        "ts": ts,
        "event_ts": ts,
        "team": TEAM_ID,
        "channel_type": channel_type,
    }
    if thread_ts:
        msg["thread_ts"] = thread_ts
    return msg


def bot_message(
    *, channel: str, bot_user: str, bot_id: str, text: str, ts: str, thread_ts: str | None, blocks: Any
) -> JSON:
    """A message an app's bot posted (``chat.postMessage``): it carries ``bot_id`` and ``app_id``."""
    msg: JSON = {
        "type": "message",
        "user": bot_user,
        "bot_id": bot_id,
        "app_id": APP_ID,
        "team": TEAM_ID,
        "text": text,
        "ts": ts,
        "channel": channel,
    }
    if thread_ts:
        msg["thread_ts"] = thread_ts
    if blocks:
        msg["blocks"] = copy.deepcopy(blocks)
    return msg


def event_callback(event: JSON, *, event_id: str, bot_user: str) -> JSON:
    """The Events API payload around one event."""
    return {
        "token": "local-verification-token",
        "team_id": TEAM_ID,
        "api_app_id": APP_ID,
        "event": event,
        "type": "event_callback",
        "event_id": event_id,
        "event_time": int(float(event.get("event_ts") or event.get("ts") or time.time())),
        "authorizations": [
            {"team_id": TEAM_ID, "user_id": bot_user, "is_bot": True, "is_enterprise_install": False}
        ],
        "is_ext_shared_channel": False,
        "event_context": f"local-{event_id}",
    }


def events_api_envelope(payload: JSON, *, envelope_id: str, retry_attempt: int = 0, reason: str = "") -> JSON:
    return {
        "envelope_id": envelope_id,
        "payload": payload,
        "type": "events_api",
        "accepts_response_payload": False,
        "retry_attempt": retry_attempt,
        "retry_reason": reason,
    }


def block_actions(
    *, channel: str, message: JSON, user: str, action_id: str, value: str, trigger: str, action_ts: str
) -> JSON:
    """The ``interactive`` payload of a button press on ``message`` (``actions[0]`` is the button)."""
    block_id = ""
    for block in message.get("blocks") or ():
        for element in block.get("elements") or ():
            if element.get("action_id") == action_id:
                block_id = block.get("block_id", "")
    container: JSON = {
        "type": "message",
        "message_ts": message["ts"],
        "channel_id": channel,
        "is_ephemeral": False,
    }
    if message.get("thread_ts"):
        container["thread_ts"] = message["thread_ts"]
    return {
        "type": "block_actions",
        "user": {"id": user, "username": user.lower(), "name": user.lower(), "team_id": TEAM_ID},
        "api_app_id": APP_ID,
        "token": "local-verification-token",
        "container": container,
        "trigger_id": trigger,
        "team": {"id": TEAM_ID, "domain": "geode-local"},
        "enterprise": None,
        "is_enterprise_install": False,
        "channel": {"id": channel, "name": channel.lower()},
        "message": copy.deepcopy(message),
        "state": {"values": {}},
        "response_url": f"https://hooks.slack.invalid/actions/{TEAM_ID}/{trigger}",
        "actions": [
            {
                "action_id": action_id,
                "block_id": block_id,
                "text": {"type": "plain_text", "text": action_id, "emoji": True},
                "value": value,
                "type": "button",
                "action_ts": action_ts,
            }
        ],
    }


def interactive_envelope(payload: JSON, *, envelope_id: str) -> JSON:
    return {
        "envelope_id": envelope_id,
        "payload": payload,
        "type": "interactive",
        "accepts_response_payload": False,
    }


def check_message(text: Any, blocks: Any) -> None:
    """The checks chat.postMessage / chat.update make on a message body; raises :class:`SlackError`."""
    if not text and not blocks:
        raise SlackError("no_text")
    if text is not None and not isinstance(text, str):
        raise SlackError("invalid_arguments")
    if text and len(text) > MAX_TEXT:
        raise SlackError("msg_too_long")
    if blocks is None:
        return
    if not isinstance(blocks, list) or len(blocks) > MAX_BLOCKS:
        raise SlackError("invalid_blocks")
    action_ids: set[str] = set()
    for block in blocks:
        if not isinstance(block, dict) or not isinstance(block.get("type"), str):
            raise SlackError("invalid_blocks")
        section = block.get("text")
        if isinstance(section, dict) and len(str(section.get("text", ""))) > MAX_SECTION_TEXT:
            raise SlackError("invalid_blocks")
        for element in block.get("elements") or ():
            if not isinstance(element, dict):
                raise SlackError("invalid_blocks")
            if element.get("type") == "button":
                action_id = str(element.get("action_id", ""))
                if not action_id or action_id in action_ids or len(action_id) > 255:
                    raise SlackError("invalid_blocks")
                action_ids.add(action_id)
                if len(str(element.get("value", ""))) > MAX_BUTTON_VALUE:
                    raise SlackError("invalid_blocks")


def with_block_ids(blocks: list[JSON] | None) -> list[JSON] | None:
    """Slack fills in a ``block_id`` for every block that has none."""
    if not blocks:
        return blocks
    out = copy.deepcopy(blocks)
    for i, block in enumerate(out):
        block.setdefault("block_id", f"b{i}")
    return out
