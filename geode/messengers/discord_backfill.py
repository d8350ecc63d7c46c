"""What a new Discord gateway session missed, read back from REST history: each bound channel (and each of
its threads) after its durable position — the newest message id the poller turned into a turn — oldest
first, through discord.py's ``Messageable.history`` (pages of 100). A channel with no position yet starts
from now."""

from __future__ import annotations

import asyncio
import logging
import time
import warnings
from collections.abc import Callable, Collection, Sequence
from typing import Any, Protocol

from geode.messengers.discord_errors import discord_call
from geode.messengers.errors import Rejected

# discord.py's voice player imports audioop (deprecated since 3.11); GEODE uses no voice
with warnings.catch_warnings():
    warnings.filterwarnings("ignore", "'audioop' is deprecated", DeprecationWarning)
    import discord

log = logging.getLogger(__name__)
DISCORD_EPOCH_MS = 1_420_070_400_000


class Positions(Protocol):
    """The poller's durable per-channel positions (``geode.messengers.journal.PollerState``); blocking."""

    def position(self, channel: str) -> str | None: ...


def snowflake_at(unix_s: float) -> int:
    """The smallest Discord id of a message sent at ``unix_s`` (ids start with a millisecond timestamp)."""
    return max(0, int(unix_s * 1000) - DISCORD_EPOCH_MS) << 22


def _id(text: str | None) -> int | None:
    try:
        return int(text) if text else None
    except ValueError:
        return None


def tracked(bound: Collection[str], chat_id: str, thread_id: str) -> bool:
    """A message of this chat (or thread) is in a bound channel: its position is kept."""
    return chat_id in bound or (bool(thread_id) and f"{chat_id}:{thread_id}" in bound)


async def _channel(client: discord.Client, channel_id: int) -> Any | None:
    """The channel or thread from discord.py's cache, else from REST; None if Discord refuses it."""
    channel = client.get_channel(channel_id)
    if channel is not None:
        return channel
    try:
        return await discord_call("get_channel", client.fetch_channel(channel_id))
    except Rejected as exc:
        log.warning("discord: channel %s cannot be read back (%s); skipped", channel_id, exc)
        return None


async def targets(
    client: discord.Client, bound: Sequence[str], positions: Positions, floor: int
) -> list[tuple[Any, int]]:
    """``(channel, after)`` for every channel to read back: a bound channel with a position and each of its
    threads discord.py knows (after the thread's own position, else the channel's: a thread started while
    GEODE was away has none), and each bound thread with a position. ``after`` is at least ``floor``."""

    async def position(channel_id: int) -> int | None:
        return _id(await asyncio.to_thread(positions.position, str(channel_id)))

    out: dict[int, tuple[Any, int]] = {}
    for key in bound:
        chat_text, _, thread_text = key.partition(":")
        chat, thread = _id(chat_text), _id(thread_text)
        if chat is None or (thread_text and thread is None):
            continue
        if thread is not None:
            after = await position(thread)
            channel = await _channel(client, thread) if after is not None else None
            if channel is not None:
                out[thread] = (channel, max(after or 0, floor))
            continue
        chat_after = await position(chat)
        channel = await _channel(client, chat) if chat_after is not None else None
        if channel is not None:
            out[chat] = (channel, max(chat_after or 0, floor))
        guild = getattr(channel, "guild", None)
        for th in list(getattr(guild, "threads", ())) if guild is not None else []:
            if th.parent_id != chat or th.id in out:
                continue
            after = await position(th.id)
            if after is None:
                after = chat_after
            if after is not None:
                out[th.id] = (th, max(after, floor))
    return list(out.values())


async def read_back(channel: Any, after: int, accept: Callable[[discord.Message], None]) -> int:
    """Hand every message of ``channel`` after ``after`` to ``accept``, oldest first. Returns how many.
    A channel Discord refuses to show (403, 404) is logged and skipped; other failures raise."""
    count = 0

    async def read() -> None:
        nonlocal count
        async for message in channel.history(limit=None, after=discord.Object(id=after), oldest_first=True):
            accept(message)
            count += 1

    try:
        await discord_call("history", read())
    except Rejected as exc:
        log.warning("discord: the history of %s cannot be read (%s); skipped", channel.id, exc)
    return count


async def guilds_known(client: discord.Client, changed: asyncio.Event, timeout_s: float) -> None:
    """Wait (up to ``timeout_s``) until every guild of the READY has arrived (``changed`` is set after each
    GUILD_CREATE is parsed), so a bound channel's threads are known; a channel still unknown is fetched."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while any(g.unavailable for g in client.guilds) and (left := deadline - loop.time()) > 0:
        changed.clear()
        try:
            await asyncio.wait_for(changed.wait(), left)
        except TimeoutError:
            return


def age_floor(max_age_s: float) -> int:
    """The oldest id read back: nothing older than ``max_age_s`` is answered after an outage."""
    return snowflake_at(time.time() - max_age_s)
