"""Finding a reply the Discord bot may have posted: Discord keeps no metadata of ours on a message, so the
reply's post is the message in its channel (or thread), sent from the reply's admission on, whose author is
the bot, whose reply reference is the user's message the reply answered, and whose content is the reply's
first part (as ``send_text`` splits it). Read with discord.py's REST client (``GET
/channels/{id}/messages?after=``), oldest pages first."""

from __future__ import annotations

from typing import Any

from geode.messengers.discord_backfill import snowflake_at
from geode.messengers.errors import PlatformError
from geode.messengers.observe import LookFor
from geode.messengers.replies import split_reply

PAGE = 100
MAX_PAGES = 20  # 2,000 messages after the admission: a reply further away than that is not looked for
MAX_CONTENT = 2000


def is_the_reply(msg: dict[str, Any], look: LookFor, *, bot_id: str, first_part: str) -> bool:
    """``msg`` is the bot's post of ``look``'s reply: its author, reply reference and text."""
    author = msg.get("author") or {}
    if str(author.get("id", "")) != bot_id or msg.get("content") != first_part:
        return False
    ref = msg.get("message_reference") or {}
    return str(ref.get("message_id") or "") == look.reply_to


def _unreferenced_copy(msg: dict[str, Any], *, bot_id: str, first_part: str) -> bool:
    author = msg.get("author") or {}
    same = str(author.get("id", "")) == bot_id and msg.get("content") == first_part
    return same and not (msg.get("message_reference") or {}).get("message_id")


async def find_discord_reply(http: Any, channel: int, look: LookFor, *, bot_id: str) -> str | None:
    """The id of the bot's post of ``look``'s reply, None when it is not there. discord.py errors propagate
    (the caller maps them); too long a history to look through whole → ``PlatformError`` (not "absent")."""
    parts = split_reply(look.text, MAX_CONTENT)
    if not bot_id or not parts:
        raise PlatformError("the reply's post cannot be recognised (no bot id or no text)")
    after = snowflake_at(max(look.since, 0.0))
    for _ in range(MAX_PAGES):
        page = await http.logs_from(channel, PAGE, after=after)
        for msg in page:
            if is_the_reply(msg, look, bot_id=bot_id, first_part=parts[0]):
                return str(msg["id"])
            if look.reply_to and _unreferenced_copy(msg, bot_id=bot_id, first_part=parts[0]):
                # its text without the reference (the user's message deleted meanwhile?): cannot tell
                raise PlatformError(f"message {msg['id']} has the reply's text but no reply reference")
        if len(page) < PAGE:
            return None
        after = max(int(m["id"]) for m in page)
    raise PlatformError(f"channel messages: more than {MAX_PAGES * PAGE} messages to look through")
