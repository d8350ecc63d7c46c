"""After a new gateway session the Discord translator reads back, from REST history, what was sent in the
bound channels while no session was connected: after each channel's stored position, oldest first, across
pages, a thread after its own position (or its channel's), each message once, the session's own ones
after; a channel with no position starts from now; unbound channels and the bot's own posts are not
items; a failed read is retried by the next poll without losing or repeating anything."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from geode.messengers.discord import DiscordTranslator
from geode.messengers.errors import RateLimited
from geode.messengers.model import Batch, InboundMessage
from geode.testing.discord_server import CHANNELS, THREADS, LocalDiscord

CHANNEL, OTHER = CHANNELS
THREAD = next(iter(THREADS))


class Positions:
    """The poller's positions in a dict (it stores ``Batch.positions`` once a batch's turns are recorded)."""

    def __init__(self) -> None:
        self.stored: dict[str, str] = {}

    def position(self, channel: str) -> str | None:
        return self.stored.get(channel)

    def store(self, batch: Batch) -> None:
        self.stored.update(batch.positions)


@pytest.fixture
def dc() -> Iterator[LocalDiscord]:
    with LocalDiscord() as server:
        yield server


def _translator(dc: LocalDiscord, positions: Positions, bound: list[str]) -> DiscordTranslator:
    tr = DiscordTranslator(
        dc.token, base_url=dc.api_base, gateway_url=dc.gateway_url, poll_timeout_s=0.3,
        connect_timeout_s=10, guild_ready_timeout_s=2,
    )  # fmt: skip
    tr.attach_positions(positions, bound)
    return tr


async def _texts(tr: DiscordTranslator, positions: Positions, until: str) -> list[tuple[str, str]]:
    """``(channel key, text)`` of every message item up to the one whose text is ``until``, each batch's
    positions stored as the poller does."""
    got: list[tuple[str, str]] = []
    async with asyncio.timeout(20):
        while until not in [text for _, text in got]:
            batch = await tr.poll(None)
            positions.store(batch)
            got += [(i.channel_key, i.text) for _, i in batch.items if isinstance(i, InboundMessage)]
    return got


async def test_a_new_session_reads_back_the_bound_channels_after_their_positions(dc: LocalDiscord) -> None:
    positions = Positions()
    tr = _translator(dc, positions, [str(CHANNEL)])
    await tr.start()
    try:
        dc.push_message(OTHER, "unbound, no position")
        dc.push_message(CHANNEL, "first")
        assert await _texts(tr, positions, "first") == [
            (str(OTHER), "unbound, no position"),
            (str(CHANNEL), "first"),
        ]
        assert set(positions.stored) == {str(CHANNEL)}  # only a bound channel has a position
        await tr.send_text(str(CHANNEL), "a reply before the restart")  # the bot's own: never an item
    finally:
        await tr.close()
    away = [f"away {i}" for i in range(130)]  # more than one page of history (100)
    for text in away[:120]:
        dc.push_message(CHANNEL, text)
    dc.push_message(CHANNEL, away[120], thread_id=THREAD)  # a thread with no position of its own
    for text in away[121:]:
        dc.push_message(CHANNEL, text)
    dc.push_message(OTHER, "unbound while away")
    tr = _translator(dc, positions, [str(CHANNEL)])
    dc.fail_next("get_messages", status=429, retry_after=60)  # longer than discord.py waits: the poll fails
    await tr.start()
    try:
        live = dc.push_message(CHANNEL, "live after the restart")  # held until the history is read
        with pytest.raises(RateLimited):
            await tr.poll(None)
        got = await _texts(tr, positions, "live after the restart")
    finally:
        await tr.close()
    thread_key = f"{CHANNEL}:{THREAD}"
    in_channel = [text for key, text in got if key == str(CHANNEL)]  # one channel's messages in order
    assert in_channel == [*away[:120], *away[121:], "live after the restart"]  # once each, oldest first
    assert [text for key, text in got if key == thread_key] == [away[120]]
    assert len(got) == len(away) + 1  # nothing unbound, nothing of the bot's, nothing twice
    assert positions.stored == {str(CHANNEL): live["id"], str(THREAD): positions.stored[str(THREAD)]}
    assert tr.read_back >= 131 and dc.calls("get_messages")[-1]["status"] == 200


async def test_with_no_position_yet_a_channel_starts_from_now(dc: LocalDiscord) -> None:
    dc.push_message(CHANNEL, "ancient history")
    positions = Positions()
    tr = _translator(dc, positions, [str(CHANNEL)])
    await tr.start()
    try:
        dc.push_message(CHANNEL, "now")
        assert await _texts(tr, positions, "now") == [(str(CHANNEL), "now")]
    finally:
        await tr.close()
    assert dc.calls("get_messages") == []
