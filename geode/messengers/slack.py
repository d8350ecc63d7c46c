"""The Slack translator: slack_sdk's Socket Mode client receives envelopes (events acked only in ``confirm``,
after the poller stored their turns) and its AsyncWebClient posts replies in the message's thread."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Collection
from pathlib import Path
from typing import Any, TypeVar

import aiohttp
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.socket_mode.aiohttp import SocketModeClient
from slack_sdk.socket_mode.request import SocketModeRequest
from slack_sdk.socket_mode.response import SocketModeResponse
from slack_sdk.web.async_client import AsyncWebClient

from geode.messengers.chat_files import fetch_slack
from geode.messengers.errors import NotPosted, PlatformError, RateLimited, Rejected
from geode.messengers.model import Attachment, Batch, CallbackPress, InboundMessage, Unhandled
from geode.messengers.observe import LookFor, slack_metadata
from geode.messengers.replies import split_reply
from geode.messengers.slack_format import to_mrkdwn
from geode.messengers.slack_observe import find_slack_reply
from geode.messengers.slack_text import (
    MAX_BUTTON_VALUE,
    approval_blocks,
    normalise,
    reaction_name,
    unreadable,
)
from geode.messengers.slack_uploads import upload_v2
from geode.messengers.telegram_files import SavedFile

log = logging.getLogger(__name__)
T = TypeVar("T")
Item = InboundMessage | CallbackPress | Unhandled | None

_RETRYABLE = {"internal_error", "fatal_error", "service_unavailable", "request_timeout", "ratelimited"}
_AUTH = {
    "invalid_auth", "not_authed", "account_inactive", "token_revoked", "token_expired",
    "not_allowed_token_type", "missing_scope", "no_permission",
}  # fmt: skip


SlackBatch = Batch  # one poll's envelopes: (envelope id, item); ``confirm`` acks those not acked on arrival


class SlackTranslator:
    """One Slack app (bot token + app-level token). Every method runs on the poller's own event loop."""

    platform = "slack"

    def __init__(
        self,
        bot_token: str,
        app_token: str,
        *,
        base_url: str = "https://slack.com/api/",
        poll_timeout_s: float = 25.0,
        connect_timeout_s: float = 30.0,
        max_batch: int = 100,
        part_limit: int = 4_000,
        channel_sessions: Collection[str] = (),
    ) -> None:
        self._bot_token, self._app_token = bot_token, app_token
        self._base_url = base_url if base_url.endswith("/") else base_url + "/"
        self._poll_timeout_s, self._connect_timeout_s = poll_timeout_s, connect_timeout_s
        self._max_batch, self._part_limit = max_batch, part_limit
        # channels bound with session = "channel": a top-level message continues the channel's session
        self._channel_sessions = frozenset(channel_sessions)
        self.bot_id = ""  # the bot's user id (U...): mentions are <@bot_id>
        self.bot_name = ""
        self._bot_bid = ""  # the bot's B... id, on the messages it posts
        self._web: AsyncWebClient | None = None
        self._socket: SocketModeClient | None = None
        self._inbox: asyncio.Queue[SocketModeRequest] | None = None
        self._hello = asyncio.Event()
        self._early_acks: set[str] = set()  # presses, acked on arrival

    # -- lifecycle -------------------------------------------------------------------------------------
    async def start(self) -> str:
        """auth.test (the bot's user id and name), then a Socket Mode connection. Returns the bot's name.
        Starting again drops the previous connection (its unconfirmed envelopes are redelivered)."""
        await self.close()
        self._hello = asyncio.Event()
        # No retry handlers: a post retried after a dropped connection could be posted twice.
        self._web = AsyncWebClient(token=self._bot_token, base_url=self._base_url, retry_handlers=[])
        auth = await self._call("auth.test", self._web.auth_test())
        self.bot_id, self.bot_name = str(auth["user_id"]), str(auth["user"])
        self._bot_bid = str(auth.get("bot_id") or "")
        opener = AsyncWebClient(base_url=self._base_url, retry_handlers=[])
        opening = opener.apps_connections_open(app_token=self._app_token)
        opened = await self._call("apps.connections.open", opening)
        self._inbox = asyncio.Queue()
        self._socket = SocketModeClient(
            self._app_token, web_client=opener, logger=logging.getLogger(f"{__name__}.socket")
        )
        self._socket.wss_uri = str(opened["url"])
        self._socket.socket_mode_request_listeners.append(self._on_request)
        self._socket.message_listeners.append(self._on_message)
        try:
            await asyncio.wait_for(self._connect(self._socket), self._connect_timeout_s)
        except (TimeoutError, OSError, aiohttp.ClientError) as exc:
            await self.close()
            raise PlatformError(f"Socket Mode connection failed: {type(exc).__name__}") from exc
        return self.bot_name

    async def close(self) -> None:
        socket, self._socket = self._socket, None
        if socket is not None:
            await socket.close()

    async def _connect(self, socket: SocketModeClient) -> None:
        await socket.connect()
        await self._hello.wait()  # Slack says hello once the link is live

    async def _on_message(self, client: Any, message: dict[str, Any], raw: str | None) -> None:
        if message.get("type") == "hello":
            self._hello.set()

    async def _on_request(self, client: Any, request: SocketModeRequest) -> None:
        """Queued for the next poll. An event is never acked here (``confirm`` acks it once its turn record
        is stored: until then Slack redelivers it). A button press is acked at once: Slack never redelivers
        one, and shows the presser an error if the ack misses its 3 s window."""
        envelope_kind = request.type  # Slack's envelope type (events_api | interactive | slash_commands)
        if envelope_kind == "interactive":
            self._early_acks.add(request.envelope_id)
            with contextlib.suppress(ConnectionError, RuntimeError, aiohttp.ClientError, AttributeError):
                await client.send_socket_mode_response(SocketModeResponse(envelope_id=request.envelope_id))
        if self._inbox is not None:
            self._inbox.put_nowait(request)

    # -- inbound ---------------------------------------------------------------------------------------
    async def poll(self, cursor: str | None = None) -> SlackBatch:
        """The envelopes received since the last poll (waits up to ``poll_timeout_s`` for the first),
        normalised. A redelivered envelope comes again: the poller's durable dedupe drops it."""
        inbox, socket = self._inbox, self._socket
        if inbox is None or socket is None:
            raise PlatformError("the Slack translator is not started", retryable=True)
        batch = SlackBatch()
        try:
            first = await asyncio.wait_for(inbox.get(), self._poll_timeout_s)
        except TimeoutError:
            if not await socket.is_connected():
                raise PlatformError("Socket Mode is not connected (slack_sdk reconnects)") from None
            return batch
        requests = [first]
        while len(requests) < self._max_batch and not inbox.empty():
            requests.append(inbox.get_nowait())
        for request in requests:
            try:
                item = normalise(
                    request.type, request.payload,
                    bot_id=self.bot_id, bot_bid=self._bot_bid, bot_name=self.bot_name,
                )  # fmt: skip
            except Exception as exc:  # a shape it cannot read: an unhandled message (answered), acked
                log.warning("slack envelope %s not understood (%s)", request.envelope_id, type(exc).__name__)
                item = unreadable(request.type, request.payload or {})
            batch.items.append((request.envelope_id, self._in_channel_session(item)))
        return batch

    async def confirm(self, batch: SlackBatch) -> None:
        """Ack every envelope of ``batch`` not acked on arrival (Slack stops redelivering it). All are
        tried; one that could not be sent raises PlatformError afterwards (Slack redelivers it: the poller's
        dedupe drops it)."""
        socket = self._socket
        if socket is None:
            raise PlatformError("the Slack translator is not started")
        failed = 0
        for envelope_id, _item in batch.items:
            if envelope_id in self._early_acks:
                self._early_acks.discard(envelope_id)
                continue
            try:
                await socket.send_socket_mode_response(SocketModeResponse(envelope_id=envelope_id))
            except (ConnectionError, RuntimeError, aiohttp.ClientError, AttributeError):
                failed += 1
        if failed:
            raise PlatformError(f"{failed} of {len(batch.items)} acks not sent (they will be redelivered)")

    # -- outbound --------------------------------------------------------------------------------------
    async def send_text(self, channel_key: str, text: str, *, reply_to: str = "") -> list[str]:
        """Post ``text`` in the channel key's thread (or threaded under ``reply_to``; flat in a DM), split
        into parts of at most ``part_limit`` characters on line boundaries (Slack refuses over 40,000 and
        advises under 4,000), each as mrkdwn (Markdown converted; ``<>&`` escaped, so no reply can ping
        ``<!channel>``). Returns the parts' ts (none for a blank text)."""
        channel, thread_ts = self._target(channel_key, reply_to)
        web = self._client()
        posted = []
        for part in split_reply(text, self._part_limit):
            reply = await self._call(
                "chat.postMessage",
                web.chat_postMessage(
                    channel=channel, text=to_mrkdwn(part), thread_ts=thread_ts, metadata=slack_metadata()
                ),
            )
            posted.append(str(reply["ts"]))
        return posted

    async def send_file(
        self, channel_key: str, filename: str, data: bytes, *, caption: str = ""
    ) -> list[str]:
        """Share ``data`` as ``filename`` in the channel key's thread (files_upload_v2, slack_uploads)."""
        channel, thread_ts = self._target(channel_key, "")
        shared = upload_v2(self._client(), channel, thread_ts, filename, data, to_mrkdwn(caption))
        return await self._call("files.upload_v2", shared)

    async def find_reply(self, look: LookFor) -> str | None:
        """The ts of the bot's post of an uncertain reply (its operation id in the metadata), else None."""
        channel, thread_ts = self._target(look.channel_key, look.reply_to)
        found = find_slack_reply(
            self._client(), channel, thread_ts, look, bot_user=self.bot_id, bot_bid=self._bot_bid
        )
        return await self._call("conversations.history", found)

    async def ask_approval(self, channel_key: str, text: str, buttons: list[tuple[str, str]]) -> str:
        """A Block Kit message with one button per ``(label, value)`` in the channel key's thread."""
        if any(len(value) > MAX_BUTTON_VALUE for _label, value in buttons):
            raise Rejected(f"a button value is longer than Slack's {MAX_BUTTON_VALUE} characters")
        channel, thread_ts = self._target(channel_key, "")
        web = self._client()
        body = to_mrkdwn(text)
        reply = await self._call(
            "chat.postMessage",
            web.chat_postMessage(
                channel=channel, text=body[:3_000], blocks=approval_blocks(body, buttons), thread_ts=thread_ts
            ),
        )
        return str(reply["ts"])

    async def answer_press(self, callback_id: str, text: str = "") -> None:
        """Slack needs no answer to a press (the ack is it); ``text`` goes to the presser alone."""
        channel, _, rest = callback_id.partition("|")
        user, _, thread_ts = rest.partition("|")
        if not text or not channel or not user:
            return
        web = self._client()
        await self._call(
            "chat.postEphemeral",
            web.chat_postEphemeral(
                channel=channel, user=user, text=to_mrkdwn(text), thread_ts=thread_ts or None
            ),
        )

    async def edit_text(self, channel_key: str, message_id: str, text: str) -> None:
        """Replace the message's text and drop its buttons (``blocks: []``)."""
        channel = channel_key.partition(":")[0]
        web = self._client()
        update = web.chat_update(channel=channel, ts=message_id, text=to_mrkdwn(text), blocks=[])
        await self._call("chat.update", update)

    async def send_status(self, channel_key: str, text: str, *, reply_to: str = "") -> str:
        """A live-progress message in the turn's thread; its ts. Slack has no per-message flag to post
        without a notification (a thread reply notifies only the thread's followers)."""
        channel, thread_ts = self._target(channel_key, reply_to)
        post = self._client().chat_postMessage(channel=channel, text=to_mrkdwn(text), thread_ts=thread_ts)
        return str((await self._call("chat.postMessage", post))["ts"])

    async def delete(self, channel_key: str, message_id: str) -> None:
        """Delete one of the bot's messages (chat.delete); one already gone is fine."""
        gone = self._client().chat_delete(channel=channel_key.partition(":")[0], ts=message_id)
        try:
            await self._call("chat.delete", gone)
        except Rejected as exc:
            if "message_not_found" not in str(exc):
                raise

    async def typing(self, channel_key: str) -> None:
        """Slack bots have no typing indicator: nothing to do."""

    async def fetch_file(self, att: Attachment, dest: Path, max_bytes: int) -> SavedFile:
        """A shared file into ``dest``: the bot token only to Slack's file host (chat_files.fetch_slack)."""
        return await fetch_slack(att, dest, max_bytes, token=self._bot_token, base_url=self._base_url)

    async def react(self, channel_key: str, message_id: str, emoji: str) -> None:
        """The ack reaction on a received message (reactions.add; the emoji or its Slack name)."""
        channel = channel_key.partition(":")[0]
        add = self._client().reactions_add(channel=channel, timestamp=message_id, name=reaction_name(emoji))
        await self._call("reactions.add", add)

    # -- helpers ---------------------------------------------------------------------------------------
    def _client(self) -> AsyncWebClient:
        if self._web is None:
            raise PlatformError("the Slack translator is not started")
        return self._web

    def _in_channel_session(self, item: Item) -> Item:
        """A top-level message (its own thread) of a ``session = "channel"`` channel, as the channel's: its
        channel key is the channel alone, so its turn continues the channel's session (replied flat)."""
        if isinstance(item, InboundMessage | Unhandled) and item.chat_id in self._channel_sessions:
            if item.thread_id and item.thread_id == item.message_id:
                return item.model_copy(update={"thread_id": ""})
        return item

    def _target(self, channel_key: str, reply_to: str) -> tuple[str, str | None]:
        channel, _, thread = channel_key.partition(":")
        if thread:
            return channel, thread
        if reply_to and not channel.startswith("D") and channel not in self._channel_sessions:
            # a reply in a channel threads; in a DM or a session = "channel" channel it stays flat
            return channel, reply_to
        return channel, None

    async def _call(self, method: str, request: Awaitable[T]) -> T:
        try:
            return await request
        except SlackApiError as exc:
            raise _mapped(method, exc) from exc
        except aiohttp.ClientConnectorError as exc:  # no connection was made: nothing was posted
            raise NotPosted(f"{method}: {type(exc).__name__}") from exc
        except (TimeoutError, OSError, aiohttp.ClientError) as exc:
            raise PlatformError(f"{method}: {type(exc).__name__}", retryable=True) from exc
        except SlackClientError as exc:
            raise PlatformError(f"{method}: {type(exc).__name__}", retryable=False) from exc


def _mapped(method: str, exc: SlackApiError) -> PlatformError:
    """A Slack API error as a platform-neutral one: 429 / ``ratelimited`` → RateLimited (``Retry-After``)."""
    response = exc.response
    status = int(getattr(response, "status_code", 0) or 0)
    data = getattr(response, "data", None)
    error = str(data.get("error", "")) if isinstance(data, dict) else ""
    if status == 429 or error == "ratelimited":
        headers = getattr(response, "headers", None) or {}
        try:
            retry_after = float(headers.get("Retry-After") or headers.get("retry-after") or 1)
        except ValueError:
            retry_after = 1.0
        return RateLimited(f"{method}: rate limited", retry_after_s=retry_after)
    if status >= 500:  # Slack answered that it failed: nothing was posted
        return NotPosted(f"{method}: {error or status}")
    if error in _RETRYABLE:
        return PlatformError(f"{method}: {error or status}", retryable=True)
    if error in _AUTH:
        return PlatformError(f"{method}: {error}", retryable=False)
    return Rejected(f"{method}: {error or status}")
