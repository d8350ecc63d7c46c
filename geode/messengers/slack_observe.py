"""Finding a reply the Slack bot may have posted: the reply's operation id travels in the post's ``metadata``
(``geode.messengers.observe.slack_metadata``); this reads the thread (``conversations.replies``) or, for a
flat reply, the channel (``conversations.history``) from the reply's admission on, with
``include_all_metadata``, and matches the bot's own message carrying that operation id."""

from __future__ import annotations

from typing import Any

from slack_sdk.web.async_client import AsyncWebClient

from geode.messengers.errors import PlatformError
from geode.messengers.observe import METADATA_EVENT, LookFor

PAGE = 200
MAX_PAGES = 10  # 2,000 messages after the admission: a reply further away than that is not looked for


def carries(msg: dict[str, Any], operation_id: str, *, bot_user: str, bot_bid: str) -> bool:
    """The message is the bot's own post of the reply ``operation_id``."""
    meta = msg.get("metadata")
    if not isinstance(meta, dict) or meta.get("event_type") != METADATA_EVENT:
        return False
    payload = meta.get("event_payload")
    if not isinstance(payload, dict) or payload.get("operation_id") != operation_id:
        return False
    return bool(msg.get("user") == bot_user or (bot_bid and msg.get("bot_id") == bot_bid))


async def find_slack_reply(
    web: AsyncWebClient,
    channel: str,
    thread_ts: str | None,
    look: LookFor,
    *,
    bot_user: str,
    bot_bid: str,
) -> str | None:
    """The ts of the bot's post of ``look``'s reply, None when it is not there. Slack errors propagate (the
    caller maps them)."""
    cursor: str | None = None
    for _ in range(MAX_PAGES):
        args: dict[str, Any] = {
            "channel": channel,
            "oldest": f"{max(look.since, 0.0):.6f}",
            "include_all_metadata": True,
            "limit": PAGE,
        }
        if cursor:
            args["cursor"] = cursor
        if thread_ts:
            page = await web.conversations_replies(ts=thread_ts, **args)
        else:
            page = await web.conversations_history(**args)
        for msg in page.get("messages") or []:
            if isinstance(msg, dict) and carries(msg, look.operation_id, bot_user=bot_user, bot_bid=bot_bid):
                return str(msg.get("ts", ""))
        cursor = str((page.get("response_metadata") or {}).get("next_cursor") or "")
        if not page.get("has_more") or not cursor:
            return None
    raise PlatformError(f"conversations history: more than {MAX_PAGES * PAGE} messages to look through")
