"""The Discord translator: discord.py's gateway client receives messages and button presses (MESSAGE_CONTENT
intent); after every new gateway session (READY, not RESUMED) the bound channels are read back from REST
history after their durable positions (:mod:`discord_backfill`), since Discord delivers nothing sent while no
session was connected. Posting is :mod:`discord_posts`."""

from __future__ import annotations

import asyncio
import logging
import warnings
from collections import OrderedDict, deque
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TypeVar

import aiohttp
import yarl

from geode.messengers import discord_backfill as backfill
from geode.messengers import discord_edits
from geode.messengers.chat_files import Attachment, SavedFile, discord_attachments, fetch_discord
from geode.messengers.discord_config import DEFAULT_BACKFILL_MAX_AGE_S as MAX_AGE_S
from geode.messengers.discord_config import DEFAULT_BASE_URL, DEFAULT_GATEWAY_URL, DiscordSettings
from geode.messengers.discord_errors import discord_call
from geode.messengers.discord_posts import DiscordPosts
from geode.messengers.errors import PlatformError
from geode.messengers.model import Batch, CallbackPress, InboundMessage, Unhandled, inbound, unhandled

# discord.py's voice player imports audioop (deprecated since 3.11); GEODE uses no voice
with warnings.catch_warnings():
    warnings.filterwarnings("ignore", "'audioop' is deprecated", DeprecationWarning)
    import discord

log = logging.getLogger(__name__)
T = TypeVar("T")
Item = InboundMessage | CallbackPress | Unhandled | None
Where = tuple[str, int] | None  # (the channel whose position it moves, the message id), for a bound channel

MAX_RATELIMIT_WAIT_S = 30.0  # discord.py waits out a shorter 429 itself; a longer one raises (its minimum)
_USER_MESSAGES = (discord.MessageType.default, discord.MessageType.reply)
_PRESSES_KEPT = 256  # presses kept for answer_press (an interaction token lives 15 min); older ones go


def point_at(base_url: str, gateway_url: str) -> None:
    """Where discord.py connects: it has no constructor option, so its class-level REST base and gateway
    URL are set here (the one place in GEODE that does this; process-wide, one Discord per process).
    A RESUME goes to the READY's ``resume_gateway_url``, which the server names itself."""
    discord.http.Route.BASE = base_url.rstrip("/")
    discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY = yarl.URL(gateway_url)


# one poll's events: ``(<session id>:<sequence> | history:<message id>, item)``; no cursor, nothing to ack;
# ``positions``: the newest message id of each bound channel (or thread) in it, stored once its turns are
DiscordBatch = Batch


class _Client(discord.Client):
    """discord.py's client, handing events to the translator as the gateway parses them (in order, while
    the websocket's sequence number is the event's own), before discord.py's ``on_*`` tasks."""

    def __init__(self, translator: DiscordTranslator, **options: Any) -> None:
        super().__init__(**options)
        self._translator = translator

    def dispatch(self, event: str, /, *args: Any, **kwargs: Any) -> None:
        try:  # never raise into the gateway's parsing: the events after this one would be lost
            if event == "message":
                self._translator._on_message(args[0])
            elif event == "interaction":
                self._translator._on_interaction(args[0])
            elif event == "raw_message_edit":
                discord_edits.on_edit(self._translator, args[0])
        except Exception:
            log.exception("discord %s event not handled", event)
        if event == "connect":  # READY parsed: a new session, which missed whatever came without one
            self._translator._on_ready()
        elif event == "socket_event_type" and args and args[0] == "GUILD_CREATE":
            asyncio.get_running_loop().call_soon(self._translator._guilds_changed.set)  # once it is parsed
        elif event == "resumed":
            log.info("discord gateway session resumed")
        super().dispatch(event, *args, **kwargs)


class DiscordTranslator(DiscordPosts):
    """One Discord bot. Every method runs on the poller's own event loop (the gateway task runs there)."""

    platform = "discord"

    def __init__(
        self,
        token: str,
        *,
        base_url: str = DEFAULT_BASE_URL,
        gateway_url: str = DEFAULT_GATEWAY_URL,
        poll_timeout_s: float = 25.0,
        connect_timeout_s: float = 30.0,
        guild_ready_timeout_s: float = 2.0,
        max_batch: int = 100,
        backfill_max_age_s: float = MAX_AGE_S,
    ) -> None:
        self._token, self._base_url, self._gateway_url = token, base_url, gateway_url
        self._poll_timeout_s, self._connect_timeout_s = poll_timeout_s, connect_timeout_s
        self._guild_ready_timeout_s, self._max_batch = guild_ready_timeout_s, max_batch
        self._backfill_max_age_s = backfill_max_age_s
        self.bot_id = ""
        self.bot_name = ""
        self._client: _Client | None = None
        self._task: asyncio.Task[None] | None = None
        self._ready_seen = asyncio.Event()
        self._inbox: deque[tuple[str, Item, Where]] = deque()  # taken only by poll, never lost to a cancel
        self._arrived = asyncio.Event()
        self._last_seen: dict[int, int] = {}  # channel (or thread) id -> the newest message id delivered
        self._presses: OrderedDict[str, tuple[discord.Interaction, asyncio.Task[None]]] = OrderedDict()
        self.dropped_replays = 0  # messages the gateway delivered again (after a resume) and were dropped
        self._positions: backfill.Positions | None = None  # attach_positions; None: nothing is read back
        self._bound: frozenset[str] = frozenset()  # bound channel keys: "<channel>" or "<channel>:<thread>"
        self._backfill_due = False  # a new session began: read back before delivering its messages
        self._held: list[tuple[str, discord.Message]] = []  # its messages meanwhile (delivery id, message)
        self._guilds_changed = asyncio.Event()
        self.read_back = 0  # messages read back from history after a new session (not all new)

    @classmethod
    def from_settings(cls, token: str, settings: DiscordSettings) -> DiscordTranslator:
        """The translator of ``[messengers.discord]``."""
        return cls(
            token, base_url=settings.base_url, gateway_url=settings.gateway_url,
            poll_timeout_s=settings.poll_timeout_s, connect_timeout_s=settings.connect_timeout_s,
            backfill_max_age_s=settings.backfill_max_age_s,
        )  # fmt: skip

    def attach_positions(self, positions: backfill.Positions, bound: Sequence[str]) -> None:
        """The poller's durable positions and the bound channel keys: from now on each batch carries the
        newest message id of each bound channel (``Batch.positions``) and every new gateway session reads
        back what was sent in them after those positions."""
        self._positions, self._bound = positions, frozenset(bound)

    # -- lifecycle -------------------------------------------------------------------------------------
    async def start(self) -> str:
        """Log in (``/users/@me``, ``/oauth2/applications/@me``), connect the gateway in a background task
        on this loop and wait for READY. Returns the bot's user name. Again after ``close`` (a restart): a
        new client and session; messages already delivered stay delivered."""
        point_at(self._base_url, self._gateway_url)
        self._arrived = asyncio.Event()  # a restart may run on another loop; undelivered items stay
        self._guilds_changed = asyncio.Event()
        intents = discord.Intents.default()
        intents.message_content = True
        client = _Client(
            self, intents=intents, max_messages=None, guild_ready_timeout=self._guild_ready_timeout_s,
            max_ratelimit_timeout=MAX_RATELIMIT_WAIT_S, allowed_mentions=discord.AllowedMentions.none(),
        )  # fmt: skip
        self._client, self._ready_seen = client, asyncio.Event()
        try:
            await discord_call("login", client.login(self._token))
            user = client.user
            assert user is not None  # set by login
            # known before the first event: a message's <@id> mention is recognised from the start
            self.bot_id, self.bot_name = str(user.id), user.name
            self._task = asyncio.create_task(client.connect(reconnect=True), name="discord-gateway")
            self._task.add_done_callback(lambda _: self._arrived.set())  # a waiting poll sees the end
            await self._wait_ready(self._task)
        except BaseException:
            await self.close()
            raise
        return self.bot_name

    async def _wait_ready(self, gateway: asyncio.Task[None]) -> None:
        ready = asyncio.create_task(self._ready_seen.wait())
        try:
            done, _ = await asyncio.wait({ready, gateway}, timeout=self._connect_timeout_s,
                                         return_when=asyncio.FIRST_COMPLETED)  # fmt: skip
        finally:
            ready.cancel()
        if gateway in done:
            await discord_call("gateway", gateway)
            raise PlatformError("the Discord gateway connection ended before READY")
        if ready not in done:
            raise PlatformError("no READY from the Discord gateway in time", retryable=True)

    async def close(self) -> None:
        client, task, self._client, self._task = self._client, self._task, None, None
        acks = [ack for _, ack in self._presses.values()]
        self._presses.clear()
        for ack in acks:
            ack.cancel()
        await asyncio.gather(*acks, return_exceptions=True)
        if client is not None:
            ready_task = getattr(client._connection, "_ready_task", None)  # the on_ready delay, if pending
            if ready_task is not None:
                ready_task.cancel()
            await client.close()
        if task is not None:
            if not task.done():
                task.cancel()
            try:
                await task
            except (asyncio.CancelledError, Exception):
                pass

    @property
    def connected(self) -> bool:
        """The gateway websocket is open (discord.py reconnects and resumes by itself when it is not)."""
        ws = self._client.ws if self._client is not None else None
        return ws is not None and ws.open

    # -- inbound ---------------------------------------------------------------------------------------
    def _delivery_id(self) -> str:
        """``<session id>:<sequence number>`` of the event being parsed (sequences restart per session)."""
        ws = self._client.ws if self._client is not None else None
        return f"{getattr(ws, 'session_id', None) or ''}:{getattr(ws, 'sequence', None) or 0}"

    def _on_ready(self) -> None:
        """READY: a new gateway session (a RESUME is not one). It carries nothing sent while no session was
        connected, so its messages wait until the bound channels were read back (the next poll does it)."""
        self._backfill_due = True
        self._ready_seen.set()
        self._arrived.set()  # a poll waiting on the old session reads back now

    def _on_message(self, message: discord.Message) -> None:
        if self._backfill_due:  # read back first: history up to now, then these (the newer ones)
            self._held.append((self._delivery_id(), message))
            return
        self._accept(self._delivery_id(), message)

    def _accept(self, delivery_id: str, message: discord.Message) -> None:
        """Into the inbox once per message id (a RESUME or the history may bring it again), the bot's own
        posts left out (the gateway echoes them; Telegram never shows them: not even an item)."""
        channel_id = message.channel.id
        if message.id <= self._last_seen.get(channel_id, 0):
            self.dropped_replays += 1
            return
        self._last_seen[channel_id] = message.id
        if self.bot_id and message.author.id == int(self.bot_id):
            return
        item = self._item(message)
        self._inbox.append((delivery_id, item, self._where(message, item)))
        self._arrived.set()

    def _where(self, message: discord.Message, item: Item) -> Where:
        """The position this message moves once handled: its channel's (or thread's), if that is bound."""
        if isinstance(item, InboundMessage | Unhandled):
            chat_id, thread_id = item.chat_id, item.thread_id
        else:
            try:
                chat_id, thread_id = _chat_of(message.channel)
            except Exception:
                return None
        if not backfill.tracked(self._bound, chat_id, thread_id):
            return None
        return (str(message.channel.id), message.id)

    async def _catch_up(self) -> None:
        """After a new session: each bound channel's history after its position, oldest first, then the
        messages the session delivered meanwhile (those already read back are dropped by id). A failure
        raises and the next poll starts again (nothing delivered twice: the ids seen stay)."""
        client = self._client
        if client is not None and self._positions is not None and self._backfill_max_age_s > 0:
            await backfill.guilds_known(client, self._guilds_changed, self._guild_ready_timeout_s)
            floor = backfill.age_floor(self._backfill_max_age_s)
            for channel, after in await backfill.targets(client, sorted(self._bound), self._positions, floor):
                after = max(after, self._last_seen.get(channel.id, 0))
                n = await backfill.read_back(channel, after, lambda m: self._accept(f"history:{m.id}", m))
                self.read_back += n
                if n:
                    log.info("discord: %d message(s) of %s read back after %s", n, channel.id, after)
        held, self._held, self._backfill_due = self._held, [], False
        for delivery_id, message in held:
            self._accept(delivery_id, message)

    def _item(self, message: discord.Message) -> InboundMessage | Unhandled | None:
        """``_normalise``, never raising (it runs inside the gateway's parsing: an exception there would
        lose the events after it): a message it cannot read is Unhandled (the poller answers and skips it)."""
        try:
            return self._normalise(message)
        except Exception as exc:
            log.warning("discord message %s not understood (%s)", message.id, type(exc).__name__)
            try:
                chat_id, thread_id = _chat_of(message.channel)
            except Exception:
                chat_id, thread_id = str(message.channel.id), ""
            return unhandled(
                "malformed", platform=self.platform, chat_id=chat_id, thread_id=thread_id,
                message_id=message.id, sender_id=message.author.id, from_bot=message.author.bot,
            )  # fmt: skip

    def _normalise(self, message: discord.Message) -> InboundMessage | Unhandled | None:
        author = message.author
        if message.type not in _USER_MESSAGES:
            return None  # joins, pins, thread starts: not messages to answer
        chat_id, thread_id = _chat_of(message.channel)
        me = int(self.bot_id) if self.bot_id else -1
        resolved = message.reference.resolved if message.reference is not None else None
        replies_to_me = isinstance(resolved, discord.Message) and resolved.author.id == me
        fields: dict[str, Any] = dict(
            platform=self.platform,
            chat_id=chat_id,
            thread_id=thread_id,
            message_id=str(message.id),
            sender_id=str(author.id),
            sender_name=author.name,
            text=self._mentions_as_name(message.content),
            mentioned=any(u.id == me for u in message.mentions) or replies_to_me,
            from_bot=author.bot or message.webhook_id is not None,  # bindings ignores it ("bot")
            attachments=discord_attachments(message),  # saved by geode/messengers/inbox.py
        )
        kind = discord_edits.unsupported(self.platform, message)
        return unhandled("unsupported", kind=kind, **fields) if kind else inbound(**fields)

    async def fetch_file(self, att: Attachment, dest: Path, max_bytes: int) -> SavedFile:
        """An attachment into ``dest``: from Discord's CDN hosts only, no token (chat_files.py)."""
        return await fetch_discord(att, dest, max_bytes, base_url=self._base_url)

    def _mentions_as_name(self, text: str) -> str:
        """``<@id>`` / ``<@!id>`` of this bot as ``@<bot name>`` (bindings strips the ``@name`` form)."""
        if not self.bot_id:
            return text
        name = f"@{self.bot_name}"
        return text.replace(f"<@{self.bot_id}>", name).replace(f"<@!{self.bot_id}>", name)

    def _on_interaction(self, interaction: discord.Interaction) -> None:
        if interaction.type is not discord.InteractionType.component or interaction.channel is None:
            return
        callback_id = str(interaction.id)
        if callback_id in self._presses:
            return  # delivered again after a resume
        data: dict[str, Any] = dict(interaction.data or {})
        custom_id = str(data.get("custom_id", ""))
        chat_id, thread_id = _chat_of(interaction.channel)
        # acknowledged at once (a deferred update): Discord drops a press unanswered within 3 s
        ack = asyncio.create_task(self._ack(interaction), name=f"discord-ack-{callback_id}")
        self._presses[callback_id] = (interaction, ack)
        while len(self._presses) > _PRESSES_KEPT:
            _, (_, old) = self._presses.popitem(last=False)
            old.cancel()
        press = CallbackPress(
            platform=self.platform,
            chat_id=chat_id,
            thread_id=thread_id,
            message_id=str(interaction.message.id) if interaction.message is not None else "",
            sender_id=str(interaction.user.id),
            callback_id=callback_id,
            data=custom_id,
        )
        self._inbox.append((self._delivery_id(), press, None))
        self._arrived.set()

    async def _ack(self, interaction: discord.Interaction) -> None:
        try:
            await interaction.response.defer()
        except (discord.HTTPException, discord.InteractionResponded, aiohttp.ClientError, OSError) as exc:
            log.info("discord: press %s not acknowledged: %s", interaction.id, exc)

    async def poll(self, cursor: str | None = None) -> DiscordBatch:
        """The messages and presses received since the last poll (waits up to ``poll_timeout_s`` for the
        first), normalised: non-user messages (joins, pins) are None, other bots' messages ``from_bot``; the
        bot's own posts are left out; after a new session, first what it missed (:meth:`_catch_up`). Raises
        PlatformError if the gateway task ended (a refused token), if nothing came and the gateway is down
        (so the poller's status shows it), or if the history could not be read (the next poll reads it)."""
        task = self._task
        if task is None:
            raise PlatformError("the Discord translator is not started")
        if self._backfill_due:
            await self._catch_up()
        if not self._inbox and not task.done():
            self._arrived.clear()
            try:
                await asyncio.wait_for(
                    self._arrived.wait(), self._poll_timeout_s
                )  # set by the gateway's end and a new session too
            except TimeoutError:
                pass
            if self._backfill_due:
                await self._catch_up()
        if not self._inbox:
            if task.done():
                await discord_call("gateway", task)
                raise PlatformError("the Discord gateway connection ended")
            if not self.connected:
                raise PlatformError("the Discord gateway is not connected (discord.py reconnects)")
        batch = DiscordBatch()
        newest: dict[str, int] = {}
        while self._inbox and len(batch.items) < self._max_batch:
            delivery_id, item, where = self._inbox.popleft()
            batch.items.append((delivery_id, item))
            if where is not None:
                newest[where[0]] = max(newest.get(where[0], 0), where[1])
        batch.positions = {channel: str(message_id) for channel, message_id in newest.items()}
        return batch

    async def confirm(self, batch: DiscordBatch) -> None:
        """Nothing to confirm: the gateway needs no ack (the durable dedupe is the message id)."""


def _chat_of(channel: Any) -> tuple[str, str]:
    """``(chat_id, thread_id)``: a thread's parent channel and the thread, or the channel alone."""
    if isinstance(channel, discord.Thread):
        return str(channel.parent_id), str(channel.id)
    return str(channel.id), ""
