"""A local Telegram Bot API server (aiohttp, own thread and loop) that python-telegram-bot runs against
unchanged, with a thread-safe test API in Python and under ``/_local/...`` over HTTP. One bot per server."""

from __future__ import annotations

import argparse
import copy
import json
import logging
import signal
import threading
import time
from collections.abc import Callable
from typing import Any, Self

from aiohttp import web

from geode.testing import bot_api_files, bot_api_uploads, button_press
from geode.testing import bot_api_wire as wire
from geode.testing.bot_api_methods import METHODS, POLL_CONFLICT, ApiError, Poll, get_updates
from geode.testing.bot_api_wire import JSON
from geode.testing.local_http import LocalHttpServer

log = logging.getLogger(__name__)

DEFAULT_TOKEN = "123456789:GEODE-local-test-token"
DEFAULT_PORT = 8081  # of main(); Slack 8082, Discord 8083: the three can run at once
_DESCRIPTIONS = {
    400: "Bad Request", 401: "Unauthorized", 403: "Forbidden: bot was blocked by the user", 404: "Not Found",
    409: POLL_CONFLICT, 500: "Internal Server Error", 502: "Bad Gateway",
}  # fmt: skip


class LocalBotApi(LocalHttpServer):
    """``with LocalBotApi() as api: Bot(api.token, base_url=api.base_url)``. State is guarded by one lock;
    HTTP handlers run on the server's own loop. Markup is checked, never rendered: posts keep their text."""

    server_name = "Bot API"
    thread_name = "local-bot-api"
    shutdown_timeout_s = 5.0
    await_cancelled = True  # a cancelled long poll still answers its client

    def __init__(
        self,
        token: str = DEFAULT_TOKEN,
        *,
        username: str = "geode_test_bot",
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        super().__init__(host, port)
        self.token, self.username = token, username
        self.bot_id = int(token.split(":", 1)[0])
        self.bot_user = wire.user_json(self.bot_id, username=username, first_name="GEODE Test", is_bot=True)
        self._lock = threading.Lock()
        self._updates: list[JSON] = []  # not yet confirmed, by update_id
        self._next_update = 100_000
        self._next_message: dict[int, int] = {}
        self._messages: dict[tuple[int, int], JSON] = {}  # every message seen or sent, as the latest JSON
        self._posts: list[tuple[int, int, str | None]] = []  # (chat, message id, parse_mode) of sendMessage
        self._deleted: set[tuple[int, int]] = set()  # (chat, message id) of deleteMessage
        self._actions: list[JSON] = []
        self.files = bot_api_files.FileStore()  # photos and documents users sent (bot_api_files.py)
        self.uploads = bot_api_uploads.Uploads()  # documents the bot sent (sendDocument, bot_api_uploads.py)
        self._reactions: list[JSON] = []  # setMessageReaction: {"chat_id", "message_id", "emoji"}
        self._calls: dict[str, list[JSON]] = {}
        self._failures: dict[str, list[ApiError]] = {}
        self._callbacks: dict[str, bool] = {}  # callback query id -> answered
        self._webhook = ""
        self._poll: Poll | None = None
        self._closing = False

    # -- lifecycle -------------------------------------------------------------------------------------
    @property
    def base_url(self) -> str:
        return f"{self.url}/bot"

    @property
    def polling(self) -> bool:
        """A getUpdates long poll is waiting right now."""
        return self._poll is not None

    def start(self) -> Self:
        """Serve (again, after ``stop()``: same port, same state, so a test can take "Telegram" down)."""
        self._closing = False
        return super().start()

    async def _before_stop(self) -> None:
        self._closing = True  # a waiting long poll answers now, and no new one waits
        self._wake()

    def _wake(self) -> None:
        if self._poll is not None:
            self._poll.event.set()

    def _notify(self) -> None:
        loop = self._loop
        if loop is not None:
            try:
                loop.call_soon_threadsafe(self._wake)
            except RuntimeError:  # stopped: nobody is polling
                pass

    # -- the test API (any thread) ---------------------------------------------------------------------
    def push_message(
        self,
        chat_id: int,
        text: str,
        *,
        sender_id: int = 1001,
        username: str = "alice",
        first_name: str = "",
        thread_id: int | None = None,
        message_id: int | None = None,
        reply_to_bot: bool = False,
        is_bot: bool = False,
        edited: bool = False,
    ) -> JSON:
        """Queue a user's message (or its edit) as an Update and return that update."""
        chat_id = int(chat_id)
        with self._lock:
            mid = self._message_id(chat_id, message_id)
            reply_to = self._last_bot_message(chat_id, thread_id) if reply_to_bot else None
            now = int(time.time())
            msg = wire.message_json(
                message_id=mid,
                sender=wire.user_json(
                    int(sender_id), username=username, first_name=first_name, is_bot=is_bot
                ),
                chat=wire.chat_json(chat_id, forum=thread_id is not None),
                date=now,
                text=text,
                thread_id=None if thread_id is None else int(thread_id),
                reply_to=reply_to,
                edit_date=now if edited else None,
            )
            self._messages[(chat_id, mid)] = msg
            return self._enqueue({"edited_message" if edited else "message": msg})

    def push_sticker(self, chat_id: int, *, sender_id: int = 1001, username: str = "alice") -> JSON:
        """Queue a user's sticker (a message without text: a kind GEODE does not handle) and return it."""
        chat_id = int(chat_id)
        with self._lock:
            mid = self._message_id(chat_id)
            sender = wire.user_json(int(sender_id), username=username)
            msg = wire.message_json(
                message_id=mid, sender=sender, chat=wire.chat_json(chat_id), date=int(time.time()), text=""
            )
            del msg["text"]
            msg["sticker"] = {
                "file_id": f"sticker-{mid}", "file_unique_id": f"s{mid}", "type": "regular",
                "width": 512, "height": 512, "is_animated": False, "is_video": False, "emoji": "👍",
            }  # fmt: skip
            self._messages[(chat_id, mid)] = msg
            return self._enqueue({"message": msg})

    push_photo = bot_api_files.push_photo  # a user's photo (caption optional)
    push_document = bot_api_files.push_document  # a user's file, named as they named it
    push_voice = bot_api_files.push_voice  # a user's voice note (audio/ogg)

    def reactions(self, chat_id: int | None = None) -> list[JSON]:
        """Each setMessageReaction the bot made, in order."""
        with self._lock:
            return [dict(r) for r in self._reactions if chat_id is None or r["chat_id"] == int(chat_id)]

    def push_callback(
        self, chat_id: int, message_id: int, data: str, *, sender_id: int = 1001, username: str = "alice"
    ) -> JSON:
        """Queue a press on an inline button of message ``message_id`` and return the update."""
        chat_id, message_id = int(chat_id), int(message_id)
        with self._lock:
            msg = self._messages.get((chat_id, message_id)) or wire.message_json(
                message_id=message_id, sender=self.bot_user, chat=wire.chat_json(chat_id), date=0, text=""
            )
            query_id = f"{self.bot_id}{len(self._callbacks) + 1:08d}"
            self._callbacks[query_id] = False
            query = {
                "id": query_id,
                "from": wire.user_json(int(sender_id), username=username),
                "message": copy.deepcopy(msg),
                "chat_instance": f"{abs(chat_id) * 7919 % 10**12}",
                "data": data,
            }
            return self._enqueue({"callback_query": query})

    def push_update(self, update: JSON, *, new_id: bool = True) -> JSON:
        """Queue a raw update again: under a fresh ``update_id`` (the same message seen twice), or with its
        own id (delivered only while the poller's offset has not confirmed past it)."""
        body = {k: v for k, v in copy.deepcopy(update).items() if k != "update_id"}
        with self._lock:
            if new_id:
                return self._enqueue(body)
            update = {"update_id": int(update["update_id"]), **body}
            self._updates.append(update)
            self._updates.sort(key=lambda u: int(u["update_id"]))
        self._notify()
        return update

    def posts(self, chat_id: int | None = None, *, start: int = 0) -> list[JSON]:
        """Every accepted sendMessage, in order, in its current state (edits applied); ``start`` skips that
        many of them (a poller of a long chat copies only what is new)."""
        with self._lock:
            out = []
            mine = [p for p in self._posts if chat_id is None or p[0] == int(chat_id)]
            for chat, mid, parse_mode in mine[start:]:
                msg = self._messages[(chat, mid)]
                out.append({
                    "chat_id": chat, "message_id": mid, "thread_id": msg.get("message_thread_id"),
                    "text": msg["text"], "parse_mode": parse_mode, "reply_markup": msg.get("reply_markup"),
                    "reply_to": (msg.get("reply_to_message") or {}).get("message_id"),
                    "edited": "edit_date" in msg, "deleted": (chat, mid) in self._deleted,
                })  # fmt: skip
            return copy.deepcopy(out)

    def actions(self, chat_id: int | None = None) -> list[JSON]:
        with self._lock:
            return [dict(a) for a in self._actions if chat_id is None or a["chat_id"] == int(chat_id)]

    def calls(self, method: str) -> list[JSON]:
        """Each call of ``method`` with this bot's token, in arrival order: ``{"params", "at" (monotonic, on
        arrival), "status"}``; ``status`` is None while the call is in flight (a waiting long poll)."""
        with self._lock:
            return copy.deepcopy(self._calls.get(method.lower(), []))

    def fail_next(
        self,
        method: str,
        *,
        status: int = 429,
        retry_after: int | None = None,
        description: str = "",
        count: int = 1,
    ) -> None:
        """The next ``count`` calls of ``method`` answer this error (a 429 always carries ``retry_after``)."""
        if status == 429 and retry_after is None:
            retry_after = 1
        default = (
            f"Too Many Requests: retry after {retry_after}" if status == 429 else _DESCRIPTIONS.get(status)
        )
        text = description or default or "Error"
        with self._lock:
            self._failures.setdefault(method.lower(), []).extend(
                ApiError(status, text, retry_after=retry_after) for _ in range(count)
            )

    def info(self) -> JSON:
        return {
            "base_url": self.base_url,
            "bot_id": self.bot_id,
            "username": self.username,
            "token": self.token,
        }

    def _enqueue(self, body: JSON) -> JSON:  # with the lock held
        self._next_update += 1
        update = {"update_id": self._next_update, **body}
        self._updates.append(update)
        self._notify()
        return copy.deepcopy(update)

    def _message_id(self, chat_id: int, wanted: int | None = None) -> int:  # with the lock held
        mid = int(wanted) if wanted is not None else self._next_message.get(chat_id, 0) + 1
        self._next_message[chat_id] = max(mid, self._next_message.get(chat_id, 0))
        return mid

    def _last_bot_message(self, chat_id: int, thread_id: int | None) -> JSON:  # with the lock held
        for chat, mid, _ in reversed(self._posts):
            msg = self._messages[(chat, mid)]
            if chat == chat_id and msg.get("message_thread_id") == thread_id:
                return copy.deepcopy(msg)
        mid = self._message_id(chat_id)
        msg = wire.message_json(
            message_id=mid, sender=self.bot_user, chat=wire.chat_json(chat_id, forum=thread_id is not None),
            date=int(time.time()), text="(an earlier message of the bot)", thread_id=thread_id,
        )  # fmt: skip
        self._messages[(chat_id, mid)] = msg
        return copy.deepcopy(msg)

    # -- HTTP ------------------------------------------------------------------------------------------
    def _app(self) -> web.Application:
        app = web.Application()
        app.router.add_route("*", "/bot{token}/{method}", self._handle_bot)
        app.router.add_route("*", "/_local/{name}", self._handle_local)
        app.router.add_route("GET", "/file/bot{token}/{path:.+}", bot_api_files.file_handler(self))
        return app

    async def _handle_bot(self, request: web.Request) -> web.Response:
        token, method = request.match_info["token"], request.match_info["method"].lower()
        if ":" not in token:
            return _reply(ApiError(404, "Not Found").envelope(), 404)
        if token != self.token:
            return _reply(ApiError(401, "Unauthorized").envelope(), 401)
        try:
            params = await _params(request)
        except ConnectionResetError:  # the bot's process died mid-request (a chaos kill): one line, no trace
            log.info("%s: the client went away while sending %s", self.server_name, method)
            return _reply(ApiError(400, "Bad Request: the request body was cut short").envelope(), 400)
        record: JSON = {"params": params, "at": time.monotonic(), "status": None}
        with self._lock:
            self._calls.setdefault(method, []).append(record)
        try:
            with self._lock:
                failures = self._failures.get(method)
                if failures:
                    raise failures.pop(0)
            if method == "getupdates":
                result: Any = await get_updates(self, params)
            elif method == "senddocument":
                with self._lock:
                    files = request.get(bot_api_uploads.FILES, {})
                    result = bot_api_uploads.send_document(self, self.uploads, params, files)
            elif method in METHODS:
                with self._lock:
                    result = METHODS[method](self, params)
            else:
                raise ApiError(404, "Not Found")
            body, status = {"ok": True, "result": result}, 200
        except ApiError as exc:
            body, status = exc.envelope(), exc.status
        with self._lock:
            record["status"] = status
        return _reply(body, status)

    async def _handle_local(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        query = {k: v for k, v in request.query.items()}
        body = await request.json() if request.can_read_body else {}
        handlers: dict[str, Callable[[], Any]] = {
            "push_message": lambda: self.push_message(**body),
            "push_callback": lambda: self.push_callback(**body),
            "press": lambda: button_press.telegram_press(self, **body),  # a button by its label
            "push_sticker": lambda: self.push_sticker(**body),
            "reactions": lambda: self.reactions(_opt_int(query.get("chat_id"))),
            "push_update": lambda: self.push_update(**body),
            "fail_next": lambda: self.fail_next(**body),
            "posts": lambda: self.posts(_opt_int(query.get("chat_id"))),
            "actions": lambda: self.actions(_opt_int(query.get("chat_id"))),
            "calls": lambda: self.calls(query.get("method", "")),
            "info": self.info,
        }
        if name not in handlers:
            return _reply({"ok": False, "error_code": 404, "description": "Not Found"}, 404)
        try:
            return _reply({"ok": True, "result": handlers[name]()}, 200)
        except (TypeError, ValueError, KeyError) as exc:
            return _reply({"ok": False, "error_code": 400, "description": f"Bad Request: {exc}"}, 400)


async def _params(request: web.Request) -> JSON:
    params: JSON = dict(request.query)
    if request.can_read_body:
        if request.content_type == "application/json":
            loaded = await request.json()
            params.update({k: v if isinstance(v, str) else json.dumps(v) for k, v in loaded.items()})
        else:
            form = await request.post()
            params.update({k: v for k, v in form.items() if isinstance(v, str)})
            request[bot_api_uploads.FILES] = bot_api_uploads.form_files(form)
    return params


def _opt_int(value: str | None) -> int | None:
    return None if value in (None, "") else int(value)


def _reply(body: JSON, status: int) -> web.Response:
    return web.Response(text=json.dumps(body), status=status, content_type="application/json")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="A local Telegram Bot API server for tests and demos.")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--token", default=DEFAULT_TOKEN)
    parser.add_argument("--username", default="geode_test_bot")
    args = parser.parse_args(argv)
    stop_on = {signal.SIGINT, signal.SIGTERM}
    signal.pthread_sigmask(signal.SIG_BLOCK, stop_on)  # the server thread inherits the mask
    api = LocalBotApi(args.token, username=args.username, host=args.host, port=args.port).start()
    shown = api.token if args.token == DEFAULT_TOKEN else f"{api.bot_id}:<as given>"
    print(f"local Bot API for @{api.username} at {api.base_url} (token {shown})")
    print(f"test API at {api.url}/_local/ (push_message, posts, ...)")
    print("set [messengers.telegram] base_url to that URL and TELEGRAM_BOT_TOKEN to the token", flush=True)
    try:
        signal.sigwait(stop_on)
    finally:
        api.stop()


if __name__ == "__main__":
    main()
