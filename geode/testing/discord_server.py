"""A local Discord server (REST under ``/api/v10``, the gateway websocket at ``/gw``; aiohttp, own thread and
loop) that discord.py runs against unchanged, with a thread-safe test API in Python. One bot, in one guild
or several (``guilds``: each guild's channels).
Like Discord, a message posted while no gateway session is connected stays in the channel's REST history
only (a RESUME replays its own session's events; a new IDENTIFY gets nothing from before it)."""

from __future__ import annotations

import argparse
import asyncio
import copy
import secrets
import signal
from collections.abc import Callable, Coroutine, Mapping, Sequence
from typing import Any, TypeVar
from urllib.parse import quote

from aiohttp import web

from geode.testing import button_press
from geode.testing import discord_events as ev
from geode.testing.chat_file_host import ChatFileHost
from geode.testing.discord_events import JSON
from geode.testing.discord_gateway import GatewaySessions
from geode.testing.discord_reactions import ReactionRoutes
from geode.testing.discord_rest import ApiError, json_response
from geode.testing.discord_uploads import DiscordUploads
from geode.testing.local_http import LocalHttpServer

DEFAULT_TOKEN = "MTEwMDAwMDAwMDAwMDAwMDAwMQ.GEODE.local-discord-test-token"
BOT_ID = 1100000000000000001
GUILD_ID = 1200000000000000001
CHANNELS = (1300000000000000001, 1300000000000000002)
THREADS = {1400000000000000001: CHANNELS[0]}  # thread id -> parent channel id
USER_ID = 1500000000000000001
DEFAULT_PORT = 8083  # of main(); Telegram 8081, Slack 8082: the three can run at once
_T = TypeVar("_T")


class LocalDiscord(LocalHttpServer, ReactionRoutes, GatewaySessions):
    """``with LocalDiscord() as dc:`` then point discord.py at ``dc.api_base`` and ``dc.gateway_url``.
    REST state is guarded by one lock; gateway state lives on the server's loop only."""

    server_name = "Discord"
    thread_name = "local-discord"

    def __init__(
        self,
        token: str = DEFAULT_TOKEN,
        *,
        bot_name: str = "geode_test_bot",
        host: str = "127.0.0.1",
        port: int = 0,
        channels: Sequence[int] = CHANNELS,
        threads: Mapping[int, int] | None = None,
        guilds: Mapping[int, Sequence[int]] | None = None,
        heartbeat_interval_ms: int = 41_250,
        message_content_enabled: bool = True,
    ) -> None:
        LocalHttpServer.__init__(self, host, port)
        ReactionRoutes.__init__(self)
        GatewaySessions.__init__(self)
        self.token, self.bot_name = token, bot_name
        self.bot_id, self.guild_id = BOT_ID, GUILD_ID
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.message_content_enabled = message_content_enabled  # False: an IDENTIFY asking for it gets 4014
        self.bot_user = ev.self_user_json(BOT_ID, bot_name)
        # guild id -> its channels (None: one guild, GUILD_ID, with ``channels``); a GUILD_CREATE each
        self.guilds = {int(g): [int(c) for c in cs] for g, cs in (guilds or {GUILD_ID: channels}).items()}
        self.channels = [c for cs in self.guilds.values() for c in cs]
        self.threads = {int(t): int(p) for t, p in (THREADS if threads is None else threads).items()}
        self.users: dict[int, JSON] = {BOT_ID: ev.user_json(BOT_ID, bot_name, bot=True)}
        self.ids = ev.Snowflakes()
        self._joined_at = ev.timestamp()
        self.file_host = ChatFileHost()  # attachments users sent (push_file)
        self.uploads = DiscordUploads(self.file_host)  # files the bot attached: uploads.of(channel_id)

    # -- lifecycle -------------------------------------------------------------------------------------
    @property
    def api_base(self) -> str:
        return f"{self.url}/api/v{ev.API_VERSION}"

    @property
    def gateway_url(self) -> str:
        return f"ws://{self.host}:{self.port}/gw"

    async def _before_stop(self) -> None:
        await self._shut_gateway()  # refuses new gateway connections from now on

    def _app(self) -> web.Application:
        app = web.Application(client_max_size=64 * 1024 * 1024)  # the bot's files (discord_uploads)
        self.add_rest_routes(app, f"/api/v{ev.API_VERSION}")
        app.router.add_get("/gw", self._gateway)
        self.file_host.route(app, "/attachments")  # the CDN's attachment URLs, no token
        app.router.add_route("*", "/_local/{name}", self._handle_local)
        return app

    def _on_loop(self, fn: Callable[[], Coroutine[Any, Any, _T]]) -> _T:
        loop = self._loop
        if loop is None or self._thread is None:
            raise RuntimeError("the local Discord server is not running")
        return asyncio.run_coroutine_threadsafe(fn(), loop).result(15)

    # -- the test API (any thread but the server's) ----------------------------------------------------
    def push_message(
        self,
        channel_id: int,
        content: str,
        *,
        author_id: int = USER_ID,
        author_name: str = "alice",
        bot: bool = False,
        mention_bot: bool = False,
        thread_id: int | None = None,
        reply_to: int | str | None = None,
    ) -> JSON:
        """A user's (or another bot's) message in a channel, or in ``thread_id`` (a thread of that channel),
        dispatched as MESSAGE_CREATE to the current session (with none connected, it is in the channel's
        history only); returns the message. ``mention_bot`` prefixes ``<@bot id>``; ``reply_to`` makes it a
        reply to that message of the same channel (pinging its author)."""
        msg = self._user_message(int(channel_id), content, author_id=int(author_id), author_name=author_name,
                                 bot=bot, mention_bot=mention_bot, thread_id=thread_id,
                                 reply_to=None if reply_to is None else int(reply_to))  # fmt: skip
        self._on_loop(lambda: self._dispatch_async("MESSAGE_CREATE", msg))
        return copy.deepcopy(msg)

    def push_sticker(self, channel_id: int, *, author_id: int = USER_ID) -> JSON:
        """A user's sticker without text (a kind GEODE does not handle), dispatched as MESSAGE_CREATE."""
        msg = self._user_message(int(channel_id), "", author_id=int(author_id), author_name="alice",
                                 bot=False, mention_bot=False, thread_id=None)  # fmt: skip
        with self._lock:
            msg["sticker_items"] = [{"id": str(self.ids.next()), "name": "wave", "format_type": 1}]
            sent = copy.deepcopy(msg)
        self._on_loop(lambda: self._dispatch_async("MESSAGE_CREATE", copy.deepcopy(sent)))
        return sent

    def push_file(
        self, channel_id: int, data: bytes, *, filename: str, content_type: str, content: str = "",
        url: str = "", author_id: int = USER_ID, flags: int = 0,
    ) -> JSON:  # fmt: skip
        """A user's message with one attachment (``content`` its text), served at its CDN-like URL on this
        server (``url`` overrides it: another host), dispatched as MESSAGE_CREATE; returns the message.
        ``flags``: the message flags (8192 IS_VOICE_MESSAGE: a voice message)."""
        msg = self._user_message(int(channel_id), content, author_id=int(author_id), author_name="alice",
                                 bot=False, mention_bot=False, thread_id=None)  # fmt: skip
        with self._lock:
            aid = str(self.ids.next())
            path = f"/attachments/{int(channel_id)}/{aid}/{quote(filename, safe='')}"
            self.file_host.add(path, data)
            where = url or f"{self.url}{path}"
            att = {"id": aid, "filename": filename, "size": len(data), "content_type": content_type}
            msg["attachments"] = [{**att, "url": where, "proxy_url": where}]
            msg["flags"] = int(flags) or msg.get("flags", 0)
            sent = copy.deepcopy(msg)
        self._on_loop(lambda: self._dispatch_async("MESSAGE_CREATE", copy.deepcopy(sent)))
        return sent

    def push_edit(self, channel_id: int, message_id: int | str, content: str) -> JSON:
        """The author edits message ``message_id``: its content and ``edited_timestamp`` change, dispatched
        as MESSAGE_UPDATE (the whole message, as Discord sends it); returns the message as edited."""
        key = (int(channel_id), int(message_id))
        with self._lock:
            msg = self.messages[key]
            msg.update(content=content, edited_timestamp=ev.timestamp())
            edited = copy.deepcopy(msg)
        self._on_loop(lambda: self._dispatch_async("MESSAGE_UPDATE", copy.deepcopy(edited)))
        return edited

    def push_button(
        self, channel_id: int, message_id: int | str, custom_id: str, *, user_id: int = USER_ID,
        user_name: str = "alice",
    ) -> JSON:  # fmt: skip
        """A press on button ``custom_id`` of the bot's message ``message_id`` (in ``channel_id``, a
        channel or a thread), dispatched as INTERACTION_CREATE; returns the interaction."""
        interaction = self._interaction(int(channel_id), int(message_id), custom_id, int(user_id), user_name)
        self._on_loop(lambda: self._dispatch_async("INTERACTION_CREATE", interaction))
        return copy.deepcopy(interaction)

    def push_raw(self, event: str, data: JSON) -> None:
        """Dispatch any gateway event as it is (a system message, an event the server does not model)."""
        self._on_loop(lambda: self._dispatch_async(event, copy.deepcopy(data)))

    def push_on_identify(self, event: str, data: JSON) -> None:
        """Dispatch ``data`` right after the next IDENTIFY's READY and GUILD_CREATE (an event in the first
        moment of a session, before discord.py's ``on_ready``)."""

        async def queue() -> None:
            self._after_identify.append((event, copy.deepcopy(data)))

        self._on_loop(queue)

    def drop_gateway(self, code: int = 4000, *, replay_seen: bool = False) -> None:
        """Close the gateway connection(s) with ``code`` (4000: the client RESUMEs; the session and its
        events are kept). ``replay_seen``: that RESUME wrongly replays every message and interaction of the
        session, also those the client had already received (for testing a client's own dedupe). Returns
        once closed: from a coroutine on the client's own loop, call it through ``asyncio.to_thread``."""

        async def drop() -> None:
            if self._session is not None:
                self._session.replay_seen = replay_seen
            await self._close_all(code)

        self._on_loop(drop)

    def identify_count(self) -> int:
        return self._identifies

    def resume_count(self) -> int:
        return self._resumes

    def connected(self) -> bool:
        """A client has identified or resumed and its connection is open."""
        session = self._session
        return session is not None and session.conn is not None

    # -- messages --------------------------------------------------------------------------------------
    def _user_message(
        self, channel_id: int, content: str, *, author_id: int, author_name: str, bot: bool,
        mention_bot: bool, thread_id: int | None, reply_to: int | None = None,
    ) -> JSON:  # fmt: skip
        if channel_id not in self.channels:
            raise ValueError(f"unknown channel {channel_id}")
        if thread_id is not None and self.threads.get(int(thread_id)) != channel_id:
            raise ValueError(f"{thread_id} is not a thread of channel {channel_id}")
        author = ev.user_json(author_id, author_name, bot=bot)
        mentions = []
        if mention_bot:
            mentions.append(self.users[BOT_ID])
            if f"<@{BOT_ID}>" not in content:
                content = f"<@{BOT_ID}> {content}"
        where = int(thread_id or channel_id)
        with self._lock:
            self.users.setdefault(author_id, author)
            reference, referenced = None, None
            if reply_to is not None:
                referenced = self.messages.get((where, reply_to))
                if referenced is None:
                    raise ValueError(f"no message {reply_to} in channel {where}")
                reference = {"type": 0, "message_id": str(reply_to), "channel_id": str(where),
                             "guild_id": str(self.guild_of(where))}  # fmt: skip
                mentions.append(copy.deepcopy(referenced["author"]))
            msg = ev.message_json(
                message_id=self.ids.next(), channel_id=where, guild_id=self.guild_of(where), author=author,
                content=content, mentions=mentions, reference=reference, joined_at=self._joined_at,
            )  # fmt: skip
            self.messages[(where, int(msg["id"]))] = msg
            if referenced is not None:
                msg = {**msg, "referenced_message": copy.deepcopy(referenced)}
        return msg

    def _interaction(self, channel_id: int, message_id: int, custom_id: str, user_id: int,
                     user_name: str) -> JSON:  # fmt: skip
        with self._lock:
            message = self.messages.get((channel_id, message_id))
            if message is None:
                raise ValueError(f"no message {message_id} in channel {channel_id}")
            user = self.users.setdefault(user_id, ev.user_json(user_id, user_name))
            interaction = ev.interaction_json(
                interaction_id=self.ids.next(), application_id=BOT_ID, token=secrets.token_urlsafe(24),
                guild_id=self.guild_of(channel_id), channel=self._channel_json(channel_id),
                member=ev.member_json(user, joined_at=self._joined_at), message=copy.deepcopy(message),
                custom_id=custom_id,
            )  # fmt: skip
            self.interactions[int(interaction["id"])] = {"token": interaction["token"], "message": message}
        return interaction

    def guild_of(self, channel_id: int) -> int:
        """The guild of a channel or thread (GUILD_ID for one the server does not know)."""
        parent = self.threads.get(channel_id, channel_id)
        return next((g for g, cs in self.guilds.items() if parent in cs), GUILD_ID)

    def _channel_json(self, channel_id: int) -> JSON:
        guild = self.guild_of(channel_id)
        if channel_id in self.threads:
            name = f"thread-{channel_id}"
            return ev.thread_json(channel_id, self.threads[channel_id], guild, USER_ID, name)
        position = self.guilds[guild].index(channel_id) if channel_id in self.channels else 0
        return ev.text_channel_json(channel_id, guild, f"channel-{channel_id}", position)

    def known_channel(self, channel_id: int) -> bool:
        return channel_id in self.channels or channel_id in self.threads

    def posted(self, message: JSON) -> None:
        self._dispatch("MESSAGE_CREATE", message)  # like Discord, the bot's own posts come back to it

    def ready_payload(self, session_id: str) -> JSON:
        return ev.ready(user=self.bot_user, guild_ids=list(self.guilds), session_id=session_id,
                        resume_url=self.gateway_url, app_id=BOT_ID)  # fmt: skip

    def guild_payloads(self) -> list[JSON]:
        """One GUILD_CREATE payload per guild: its channels and the threads of those channels."""
        members = [ev.member_json(self.users[BOT_ID], joined_at=self._joined_at)]
        return [
            ev.guild_json(
                guild, "GEODE local guild" if guild == GUILD_ID else f"GEODE local guild {guild}",
                owner_id=USER_ID, channels=[self._channel_json(c) for c in channels], members=members,
                threads=[self._channel_json(t) for t, parent in self.threads.items() if parent in channels],
            )
            for guild, channels in self.guilds.items()
        ]  # fmt: skip

    # -- the test API over HTTP, for a demo driven from another process --------------------------------
    async def _handle_local(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        body = await request.json() if request.can_read_body else {}
        query = dict(request.query)
        try:
            if name == "press":  # a button by its label, on the newest post showing it (button_press.py)
                name, body = "push_button", button_press.discord_body(self, body)
            if name == "push_message":
                result: Any = self._user_message(
                    int(body["channel_id"]), str(body["content"]), bot=bool(body.get("bot", False)),
                    author_id=int(body.get("author_id", USER_ID)),
                    author_name=str(body.get("author_name", "alice")),
                    mention_bot=bool(body.get("mention_bot", False)),
                    thread_id=None if body.get("thread_id") is None else int(body["thread_id"]),
                    reply_to=None if body.get("reply_to") is None else int(body["reply_to"]),
                )  # fmt: skip
                self._dispatch("MESSAGE_CREATE", result)
            elif name == "push_button":
                result = self._interaction(
                    int(body["channel_id"]), int(body["message_id"]), str(body["custom_id"]),
                    int(body.get("user_id", USER_ID)), str(body.get("user_name", "alice")),
                )  # fmt: skip
                self._dispatch("INTERACTION_CREATE", result)
            elif name == "drop_gateway":
                await self._close_all(int(body.get("code", 4000)))
                result = None
            elif name == "fail_next":
                self.fail_next(
                    str(body["route"]), status=int(body.get("status", 429)),
                    retry_after=float(body.get("retry_after", 1)), count=int(body.get("count", 1)),
                )  # fmt: skip
                result = None
            elif name == "interaction_responses":
                result = self.interaction_responses()
            elif name == "posts":
                result = self.posts(int(query["channel_id"]) if query.get("channel_id") else None)
            elif name == "info":
                result = {"api_base": self.api_base, "gateway_url": self.gateway_url, "bot_id": str(BOT_ID),
                          "guild_id": str(GUILD_ID), "channels": [str(c) for c in self.channels],
                          "guilds": {str(g): [str(c) for c in cs] for g, cs in self.guilds.items()},
                          "threads": {str(t): str(p) for t, p in self.threads.items()}}  # fmt: skip
            else:
                raise ApiError(404, "404: Not Found", 0)
        except (KeyError, TypeError, ValueError) as exc:
            return json_response({"message": f"bad request: {exc}", "code": 0}, 400)
        except ApiError as exc:
            return exc.response()
        return json_response({"result": result}, 200)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="A local Discord REST + gateway server for tests and demos.")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--token", default=DEFAULT_TOKEN)
    parser.add_argument("--bot-name", default="geode_test_bot")
    args = parser.parse_args(argv)
    stop_on = {signal.SIGINT, signal.SIGTERM}
    signal.pthread_sigmask(signal.SIG_BLOCK, stop_on)  # the server thread inherits the mask
    server = LocalDiscord(args.token, bot_name=args.bot_name, host=args.host, port=args.port).start()
    shown = server.token if args.token == DEFAULT_TOKEN else "<as given>"
    print(f"local Discord for {server.bot_name} (bot id {BOT_ID}): REST {server.api_base}")
    print(f"gateway {server.gateway_url}")
    print(f"token {shown}; guild {GUILD_ID}, channels {server.channels}, threads {server.threads}")
    print(
        f"test API at {server.url}/_local/ (push_message, push_button, drop_gateway, fail_next, posts, ...)"
    )
    print("set [messengers.discord] base_url / gateway_url to those URLs and DISCORD_BOT_TOKEN", flush=True)
    try:
        signal.sigwait(stop_on)
    finally:
        server.stop()


if __name__ == "__main__":
    main()
