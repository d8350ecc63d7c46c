"""The Discord translator: discord.py's gateway client receives messages and button presses (MESSAGE_CONTENT
intent), its REST client posts replies (message_reference, threads), approvals as message components."""

from __future__ import annotations

import asyncio
import logging
import secrets
import warnings
from collections import OrderedDict, deque
from typing import Any, TypeVar

import aiohttp
import yarl

from geode.messengers.discord_config import DEFAULT_BASE_URL, DEFAULT_GATEWAY_URL, DiscordSettings
from geode.messengers.discord_errors import discord_call
from geode.messengers.errors import PlatformError, Rejected
from geode.messengers.model import Batch, CallbackPress, InboundMessage, Unhandled, inbound, unhandled
from geode.messengers.replies import split_reply

# discord.py's voice player imports audioop (deprecated since 3.11); GEODE uses no voice
with warnings.catch_warnings():
    warnings.filterwarnings("ignore", "'audioop' is deprecated", DeprecationWarning)
    import discord
    from discord.http import MultipartParameters

log = logging.getLogger(__name__)
T = TypeVar("T")
Item = InboundMessage | CallbackPress | Unhandled | None

MAX_CONTENT = 2000
MAX_CUSTOM_ID = 100
MAX_RATELIMIT_WAIT_S = 30.0  # discord.py waits out a shorter 429 itself; a longer one raises (its minimum)
_USER_MESSAGES = (discord.MessageType.default, discord.MessageType.reply)
_NO_PINGS = {"parse": [], "replied_user": False}  # a reply never pings @everyone, roles, users
_PRESSES_KEPT = 256  # presses kept for answer_press (an interaction token lives 15 min); older ones go


def point_at(base_url: str, gateway_url: str) -> None:
    """Where discord.py connects: it has no constructor option, so its class-level REST base and gateway
    URL are set here (the one place in GEODE that does this; process-wide, one Discord per process).
    A RESUME goes to the READY's ``resume_gateway_url``, which the server names itself."""
    discord.http.Route.BASE = base_url.rstrip("/")
    discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY = yarl.URL(gateway_url)


DiscordBatch = Batch  # one poll's events: ``(<session id>:<sequence>, item)``; no cursor, nothing to ack


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
        except Exception:
            log.exception("discord %s event not handled", event)
        if event == "connect":  # READY parsed
            self._translator._ready_seen.set()
        elif event == "resumed":
            log.info("discord gateway session resumed")
        super().dispatch(event, *args, **kwargs)


class DiscordTranslator:
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
    ) -> None:
        self._token, self._base_url, self._gateway_url = token, base_url, gateway_url
        self._poll_timeout_s, self._connect_timeout_s = poll_timeout_s, connect_timeout_s
        self._guild_ready_timeout_s, self._max_batch = guild_ready_timeout_s, max_batch
        self.bot_id = ""
        self.bot_name = ""
        self._client: _Client | None = None
        self._task: asyncio.Task[None] | None = None
        self._ready_seen = asyncio.Event()
        self._inbox: deque[tuple[str, Item]] = deque()  # taken only by poll, never lost to a cancel
        self._arrived = asyncio.Event()
        self._last_seen: dict[int, int] = {}  # channel (or thread) id -> the newest message id delivered
        self._presses: OrderedDict[str, tuple[discord.Interaction, asyncio.Task[None]]] = OrderedDict()
        self.dropped_replays = 0  # messages the gateway delivered again (after a resume) and were dropped

    @classmethod
    def from_settings(cls, token: str, settings: DiscordSettings) -> DiscordTranslator:
        """The translator of ``[messengers.discord]``."""
        return cls(
            token, base_url=settings.base_url, gateway_url=settings.gateway_url,
            poll_timeout_s=settings.poll_timeout_s, connect_timeout_s=settings.connect_timeout_s,
        )  # fmt: skip

    # -- lifecycle -------------------------------------------------------------------------------------
    async def start(self) -> str:
        """Log in (``/users/@me``, ``/oauth2/applications/@me``), connect the gateway in a background task
        on this loop and wait for READY. Returns the bot's user name. Again after ``close`` (a restart): a
        new client and session; messages already delivered stay delivered."""
        point_at(self._base_url, self._gateway_url)
        self._arrived = asyncio.Event()  # a restart may run on another loop; undelivered items stay
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

    def _on_message(self, message: discord.Message) -> None:
        channel_id = message.channel.id
        if message.id <= self._last_seen.get(channel_id, 0):
            self.dropped_replays += 1  # already delivered (a resumed gateway sent it again)
            return
        self._last_seen[channel_id] = message.id
        if self.bot_id and message.author.id == int(self.bot_id):
            return  # the gateway echoes the bot's own posts (Telegram never shows them): not even an item
        self._inbox.append((self._delivery_id(), self._item(message)))
        self._arrived.set()

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
        return inbound(
            platform=self.platform,
            chat_id=chat_id,
            thread_id=thread_id,
            message_id=str(message.id),
            sender_id=str(author.id),
            sender_name=author.name,
            text=self._mentions_as_name(message.content),
            mentioned=any(u.id == me for u in message.mentions) or replies_to_me,
            from_bot=author.bot or message.webhook_id is not None,  # bindings ignores it ("bot")
        )

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
        self._inbox.append((self._delivery_id(), press))
        self._arrived.set()

    async def _ack(self, interaction: discord.Interaction) -> None:
        try:
            await interaction.response.defer()
        except (discord.HTTPException, discord.InteractionResponded, aiohttp.ClientError, OSError) as exc:
            log.info("discord: press %s not acknowledged: %s", interaction.id, exc)

    async def poll(self, cursor: str | None = None) -> DiscordBatch:
        """The messages and presses received since the last poll (waits up to ``poll_timeout_s`` for the
        first), normalised: non-user messages (joins, pins) are None, other bots' messages ``from_bot``; the
        bot's own posts are left out. Raises PlatformError if the gateway task ended (a refused token), or
        if nothing came and the gateway is down (so the poller's status shows it)."""
        task = self._task
        if task is None:
            raise PlatformError("the Discord translator is not started")
        if not self._inbox and not task.done():
            self._arrived.clear()
            try:
                await asyncio.wait_for(
                    self._arrived.wait(), self._poll_timeout_s
                )  # set by the gateway's end too
            except TimeoutError:
                pass
        if not self._inbox:
            if task.done():
                await discord_call("gateway", task)
                raise PlatformError("the Discord gateway connection ended")
            if not self.connected:
                raise PlatformError("the Discord gateway is not connected (discord.py reconnects)")
        batch = DiscordBatch()
        while self._inbox and len(batch.items) < self._max_batch:
            batch.items.append(self._inbox.popleft())
        return batch

    async def confirm(self, batch: DiscordBatch) -> None:
        """Nothing to confirm: the gateway needs no ack (the durable dedupe is the message id)."""

    # -- outbound --------------------------------------------------------------------------------------
    async def send_text(self, channel_key: str, text: str, *, reply_to: str = "") -> list[str]:
        """Post ``text`` in the channel (or its thread), the first part replying to ``reply_to``, split at
        2000 characters on line boundaries. Returns the posted message ids."""
        channel = _target(channel_key)
        http = self._http()
        posted: list[str] = []
        for part in split_reply(text, MAX_CONTENT):
            # a nonce Discord enforces: discord.py's own retry of this POST (after a 5xx or a reset
            # connection) returns the message already created instead of posting it twice
            payload: dict[str, Any] = {"content": part, "allowed_mentions": _NO_PINGS, **_once()}
            if reply_to and not posted:
                payload["message_reference"] = {
                    "message_id": int(reply_to), "channel_id": channel, "fail_if_not_exists": False,
                }  # fmt: skip
            sent = await discord_call("send_message", http.send_message(channel, params=_params(payload)))
            posted.append(str(sent["id"]))
        return posted

    async def ask_approval(self, channel_key: str, text: str, buttons: list[tuple[str, str]]) -> str:
        """A message with one button per ``(label, custom_id)`` (at most 25; ids ≤ 100 characters)."""
        if not buttons or len(buttons) > 25:
            raise Rejected("an approval needs 1 to 25 buttons")
        if any(not 1 <= len(custom_id) <= MAX_CUSTOM_ID for _label, custom_id in buttons):
            raise Rejected(f"a button's custom_id must be 1 to {MAX_CUSTOM_ID} characters")
        styles = (discord.ButtonStyle.success, discord.ButtonStyle.danger)
        row: list[dict[str, Any]] = [
            {"type": 2, "style": (styles[i] if i < 2 else discord.ButtonStyle.secondary).value,
             "label": label[:80], "custom_id": custom_id}
            for i, (label, custom_id) in enumerate(buttons)
        ]  # fmt: skip
        components = [{"type": 1, "components": row[i : i + 5]} for i in range(0, len(row), 5)]
        payload = {
            "content": text[:MAX_CONTENT], "components": components, "allowed_mentions": _NO_PINGS, **_once(),
        }  # fmt: skip
        channel = _target(channel_key)
        sent = await discord_call("send_message", self._http().send_message(channel, params=_params(payload)))
        return str(sent["id"])

    async def answer_press(self, callback_id: str, text: str = "") -> None:
        """Answer a press: ``text`` goes to the presser alone (an ephemeral follow-up to the acknowledgement
        sent on arrival; a response if that failed). An unknown or already answered press is Rejected."""
        entry = self._presses.pop(callback_id, None)
        if entry is None:
            raise Rejected(f"interaction {callback_id} is unknown or was answered already")
        interaction, ack = entry
        await asyncio.wait({ack})
        content = text[:MAX_CONTENT]
        if interaction.response.is_done():
            if content:
                await discord_call("followup", interaction.followup.send(content, ephemeral=True))
        elif content:
            await discord_call(
                "interaction_callback", interaction.response.send_message(content, ephemeral=True)
            )
        else:
            await discord_call("interaction_callback", interaction.response.defer())

    async def edit_text(self, channel_key: str, message_id: str, text: str) -> None:
        """Replace the message's text and drop its buttons."""
        payload = {"content": text[:MAX_CONTENT], "components": [], "allowed_mentions": _NO_PINGS}
        channel = _target(channel_key)
        await discord_call(
            "edit_message", self._http().edit_message(channel, int(message_id), params=_params(payload))
        )

    async def typing(self, channel_key: str) -> None:
        """Show "<bot> is typing…" in the channel (or thread) for about 10 s."""
        await discord_call("typing", self._http().send_typing(_target(channel_key)))

    # -- helpers ---------------------------------------------------------------------------------------
    def _http(self) -> discord.http.HTTPClient:
        if self._client is None:
            raise PlatformError("the Discord translator is not started")
        return self._client.http


def _once() -> dict[str, Any]:
    """A fresh ``nonce`` (at most 25 characters) that Discord checks for uniqueness (``enforce_nonce``)."""
    return {"nonce": secrets.token_hex(12), "enforce_nonce": True}


def _params(payload: dict[str, Any]) -> MultipartParameters:
    return MultipartParameters(payload=payload, multipart=None, files=None)


def _target(channel_key: str) -> int:
    """Where a post goes: the thread of ``"<channel>:<thread>"``, else the channel."""
    chat, _, thread = channel_key.partition(":")
    try:
        return int(thread or chat)
    except ValueError:
        raise Rejected(f"{channel_key!r} is not a Discord channel key") from None


def _chat_of(channel: Any) -> tuple[str, str]:
    """``(chat_id, thread_id)``: a thread's parent channel and the thread, or the channel alone."""
    if isinstance(channel, discord.Thread):
        return str(channel.parent_id), str(channel.id)
    return str(channel.id), ""
