"""A local Slack server (aiohttp, own thread and loop) that the real slack_sdk runs against unchanged: the Web
API under ``/api/`` and a Socket Mode websocket that delivers, tracks acks of and redelivers envelopes."""

from __future__ import annotations

import argparse
import copy
import json
import signal
import threading
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

from aiohttp import web

from geode.testing import button_press, slack_web
from geode.testing import slack_events as ev
from geode.testing.chat_file_host import ChatFileHost
from geode.testing.local_http import LocalHttpServer
from geode.testing.slack_events import JSON, SlackError
from geode.testing.slack_socket import SocketHub
from geode.testing.slack_uploads import SlackUploads

BOT_TOKEN = "xoxb-0000000001-geode-local-bot-token"
APP_TOKEN = "xapp-1-A0GEODE01-geode-local-app-token"
DEFAULT_USER = "U0ALICE01"
DEFAULT_PORT = 8082  # of main(); Telegram 8081, Discord 8083: the three can run at once


class LocalSlack(LocalHttpServer):
    """``with LocalSlack() as slack: AsyncWebClient(slack.bot_token, base_url=slack.api_url)``.

    State is guarded by one lock; HTTP and websocket handlers run on the server's own loop. Socket Mode
    (links, acks, redelivery after ``redeliver_after_s``, at most ``max_retries`` times) is ``self.hub``.
    ``subscriptions`` are the bot events the app subscribed to: a message that mentions the bot comes as
    both a ``message`` and an ``app_mention`` event, like on Slack. ``echo_bot_posts``: the bot's own posts
    come back as message events too (as Slack sends them to an app subscribed to channel messages).
    """

    server_name = "Slack"
    thread_name = "local-slack"

    def __init__(
        self,
        *,
        bot_token: str = BOT_TOKEN,
        app_token: str = APP_TOKEN,
        bot_user: str = "U0GEODEBOT",
        bot_name: str = "geode",
        host: str = "127.0.0.1",
        port: int = 0,
        redeliver_after_s: float = 3.0,
        max_retries: int = 3,
        subscriptions: tuple[str, ...] = ("message", "app_mention"),
        echo_bot_posts: bool = False,
    ) -> None:
        self.bot_token, self.app_token = bot_token, app_token
        self.bot_user, self.bot_name, self.bot_id = bot_user, bot_name, "B0GEODEBOT"
        super().__init__(host, port)
        self.redeliver_after_s, self.max_retries = redeliver_after_s, max_retries
        self.subscriptions, self.echo_bot_posts = subscriptions, echo_bot_posts
        self._lock = threading.Lock()
        self._clock = ev.Clock()
        self._messages: dict[tuple[str, str], JSON] = {}  # (channel, ts) -> the message, edits applied
        self._posts: list[tuple[str, str]] = []  # chat.postMessage, in order
        self._ephemeral: list[JSON] = []
        self._reactions: list[JSON] = []
        self._calls: dict[str, list[JSON]] = {}
        self._failures: dict[str, list[SlackError]] = {}
        self.hub = SocketHub(redeliver_after_s=redeliver_after_s, max_retries=max_retries)
        self.file_host = ChatFileHost(token=bot_token)  # shared files, served at their url_private
        self.uploads = SlackUploads()  # the bot's files_upload_v2: uploads.of(channel) are its shares

    # -- lifecycle -------------------------------------------------------------------------------------
    @property
    def api_url(self) -> str:
        return f"{self.url}/api/"

    @property
    def ws_url(self) -> str:
        return f"ws://{self.host}:{self.port}/slack-ws"

    async def _before_stop(self) -> None:
        await self.hub.close_all()

    # -- the test API (any thread) ---------------------------------------------------------------------
    def push_message(
        self,
        channel: str,
        text: str,
        *,
        user: str = DEFAULT_USER,
        thread_ts: str | None = None,
        mention: bool = False,
    ) -> JSON:
        """A user posts ``text`` (``mention``: addressed to the bot as ``<@BOT> text``). Returns the event
        delivered first, with its ``event_id``, ``envelope_id`` and ``event_ids`` (all events it caused)."""
        tag = f"<@{self.bot_user}>"
        if mention and tag not in text:
            text = f"{tag} {text}"
        with self._lock:
            ts = self._clock.ts()
            im = channel.startswith("D")
            msg = ev.user_message(
                channel=channel, user=user, text=text, ts=ts, thread_ts=thread_ts,
                channel_type="im" if im else "channel",
            )  # fmt: skip
            self._messages[(channel, ts)] = msg
            events = []
            if "message" in self.subscriptions:
                events.append(msg)
            if "app_mention" in self.subscriptions and tag in text and not im:
                mention_event = {k: v for k, v in msg.items() if k != "channel_type"}
                events.append({**mention_event, "type": "app_mention"})
            queued = [self._queue_event(dict(e)) for e in events]
        if not queued:
            return {**msg, "event_id": "", "envelope_id": "", "event_ids": []}
        first = queued[0]
        return {
            **copy.deepcopy(first["payload"]["event"]),
            "event_id": first["payload"]["event_id"],
            "envelope_id": first["envelope_id"],
            "event_ids": [e["payload"]["event_id"] for e in queued],
        }

    def push_file(
        self, channel: str, *, user: str = DEFAULT_USER, name: str = "notes.pdf", data: bytes = b"%PDF-1.4",
        mimetype: str = "application/pdf", text: str = "", voice: bool = False, url: str = "",
    ) -> JSON:  # fmt: skip
        """A user shares a file (a ``file_share`` message, ``text`` its comment; ``voice``: an audio clip),
        served at its ``url_private`` with the bot token only (``url`` overrides it: another host); returns
        the envelope queued."""
        with self._lock:
            ts = self._clock.ts()
            msg = ev.user_message(channel=channel, user=user, text=text, ts=ts, thread_ts=None)
            fid = f"F{ts.replace('.', '')}"
            path = f"/files-pri/{ev.TEAM_ID}-{fid}/{quote(name, safe='')}"
            self.file_host.add(path, data)
            where = url or f"{self.url}{path}"
            file = {"id": fid, "name": name, "mimetype": mimetype, "size": len(data), "mode": "hosted",
                    "url_private": where, "url_private_download": where}  # fmt: skip
            if voice:
                file.update(subtype="slack_audio", mimetype="audio/webm", name="audio_message.webm")
            msg.update(subtype="file_share", files=[file])
            self._messages[(channel, ts)] = msg
            return copy.deepcopy(self._queue_event(dict(msg)))

    def push_edit(self, channel: str, ts: str, text: str, *, user: str = DEFAULT_USER) -> JSON:
        """A user edits their message ``ts``: Slack's hidden ``message_changed`` event (the message as
        edited, ``edited.ts`` the edit's time, and the previous one); returns the envelope queued."""
        with self._lock:
            old = self._messages[(channel, ts)]
            edit_ts = self._clock.ts()
            new = {**old, "text": text, "edited": {"user": user, "ts": edit_ts}}
            self._messages[(channel, ts)] = new
            event = {
                "type": "message", "subtype": "message_changed", "hidden": True, "channel": channel,
                "channel_type": old.get("channel_type", "channel"), "ts": edit_ts, "event_ts": edit_ts,
                "message": {k: v for k, v in new.items() if k not in ("channel", "channel_type")},
                "previous_message": {k: v for k, v in old.items() if k not in ("channel", "channel_type")},
            }  # fmt: skip
            return copy.deepcopy(self._queue_event(event))

    def reactions(self, channel: str | None = None) -> list[JSON]:
        """Each reactions.add accepted, in order: ``{"channel", "ts", "name"}``."""
        with self._lock:
            return [dict(r) for r in self._reactions if channel is None or r["channel"] == channel]

    def push_action(
        self, channel: str, message_ts: str, action_id: str, value: str, *, user: str = DEFAULT_USER
    ) -> JSON:
        """A user presses button ``action_id`` (``value``) on message ``message_ts``; returns the envelope."""
        with self._lock:
            message = self._messages.get((channel, message_ts)) or {"type": "message", "ts": message_ts}
            payload = ev.block_actions(
                channel=channel, message=message, user=user, action_id=action_id, value=value,
                trigger=self._clock.envelope_id(), action_ts=self._clock.ts(),
            )  # fmt: skip
            envelope = ev.interactive_envelope(payload, envelope_id=self._clock.envelope_id())
        self.hub.queue(envelope)
        return copy.deepcopy(envelope)

    def push_envelope(self, envelope: JSON) -> JSON:
        """Send ``envelope`` verbatim (e.g. an earlier one again, with ``retry_attempt`` set)."""
        self.hub.queue(envelope)
        return copy.deepcopy(envelope)

    def disconnect(self, reason: str = "refresh_requested") -> None:
        """Ask every connected client to reconnect (slack_sdk opens a new connection, closes this one)."""
        self.hub.disconnect(reason)

    def posts(self, channel: str | None = None) -> list[JSON]:
        """Every chat.postMessage accepted, in order, in its current state (edits applied; deleted ones left
        out)."""
        with self._lock:
            out = []
            for ch, ts in self._posts:
                if channel is not None and ch != channel:
                    continue
                msg = self._messages.get((ch, ts))
                if msg is None:  # chat.delete
                    continue
                out.append({
                    "channel": ch, "ts": ts, "thread_ts": msg.get("thread_ts"), "text": msg.get("text", ""),
                    "blocks": msg.get("blocks"), "edited": "edited" in msg, "metadata": msg.get("metadata"),
                })  # fmt: skip
            return copy.deepcopy(out)

    def ephemerals(self, channel: str | None = None) -> list[JSON]:
        with self._lock:
            return [dict(e) for e in self._ephemeral if channel is None or e["channel"] == channel]

    def acks(self) -> list[str]:
        """The envelope ids the clients acked, in order."""
        return self.hub.acks()

    def envelopes(self) -> list[JSON]:
        """Every envelope written to a socket, in order (redeliveries included)."""
        return self.hub.envelopes()

    def connections(self) -> int:
        return self.hub.connections()

    def calls(self, method: str) -> list[JSON]:
        """Each call of ``method``: ``{"params", "at" (monotonic), "status", "error"}``."""
        with self._lock:
            return copy.deepcopy(self._calls.get(method, []))

    def fail_next(
        self,
        method: str,
        *,
        status: int = 429,
        retry_after: int = 1,
        error: str | None = None,
        count: int = 1,
    ) -> None:
        """The next ``count`` calls of ``method`` fail: a 429 is ``ratelimited`` with ``Retry-After``."""
        default = "ratelimited" if status == 429 else "internal_error" if status >= 500 else "fatal_error"
        code = error or default
        with self._lock:
            self._failures.setdefault(method, []).extend(
                SlackError(code, status=status, retry_after=retry_after if status == 429 else None)
                for _ in range(count)
            )

    def info(self) -> JSON:
        return {
            "api_url": self.api_url, "bot_token": self.bot_token, "app_token": self.app_token,
            "bot_user": self.bot_user, "bot_name": self.bot_name,
        }  # fmt: skip

    def _queue_event(self, event: JSON) -> JSON:  # the lock is held
        payload = ev.event_callback(event, event_id=self._clock.event_id(), bot_user=self.bot_user)
        envelope = ev.events_api_envelope(payload, envelope_id=self._clock.envelope_id())
        self.hub.queue(envelope)
        return envelope

    # -- HTTP and websocket ----------------------------------------------------------------------------
    def _app(self) -> web.Application:
        self.hub.loop = self._loop  # called on the server's thread, its loop just made
        app = web.Application(client_max_size=64 * 1024 * 1024)  # the bot's uploads (slack_uploads)
        app.router.add_route("*", "/api/{method}", self._handle_api)
        app.router.add_get("/slack-ws", self.hub.handle)
        self.file_host.route(app, "/files-pri")
        self.uploads.route(app)  # the upload URLs files.getUploadURLExternal hands out
        app.router.add_route("*", "/_local/{name}", self._handle_local)
        return app

    async def _handle_api(self, request: web.Request) -> web.Response:
        method, at = request.match_info["method"], time.monotonic()
        is_json = request.content_type == "application/json"
        form = None if is_json else await request.post()
        body = await request.json() if is_json and request.can_read_body else None
        params = slack_web.params_of(request.query, form, body)
        auth = request.headers.get("Authorization", "")
        token = auth[7:].strip() if auth.lower().startswith("bearer ") else str(params.pop("token", "") or "")
        params.pop("token", None)
        headers: dict[str, str] = {}
        try:
            kind = slack_web.token_kind(token, bot_token=self.bot_token, app_token=self.app_token)
            slack_web.check_token(method, kind)
            with self._lock:
                failures = self._failures.get(method)
                if failures:
                    raise failures.pop(0)
                if method not in slack_web.METHODS:
                    raise SlackError("unknown_method")
                result = slack_web.METHODS[method][1](self, params)
            reply, status = {"ok": True, **result}, 200
        except SlackError as exc:
            reply, status = exc.body(), exc.status
            if exc.retry_after is not None:
                headers["Retry-After"] = str(exc.retry_after)
        with self._lock:
            self._calls.setdefault(method, []).append(
                {"params": params, "at": at, "status": status, "error": reply.get("error")}
            )
        return web.Response(
            text=json.dumps(reply), status=status, content_type="application/json", headers=headers
        )

    async def _handle_local(self, request: web.Request) -> web.Response:
        name, query = request.match_info["name"], dict(request.query)
        body = await request.json() if request.can_read_body else {}
        handlers: dict[str, Callable[[], Any]] = {
            "push_message": lambda: self.push_message(**body),
            "push_action": lambda: self.push_action(**body),
            "press": lambda: button_press.slack_press(self, **body),  # a button by its label
            "push_envelope": lambda: self.push_envelope(body),
            "fail_next": lambda: self.fail_next(**body),
            "disconnect": lambda: self.disconnect(**body),
            "posts": lambda: self.posts(query.get("channel")),
            "ephemerals": lambda: self.ephemerals(query.get("channel")),
            "acks": self.acks,
            "envelopes": self.envelopes,
            "calls": lambda: self.calls(query.get("method", "")),
            "info": self.info,
        }
        if name not in handlers:
            return web.json_response({"ok": False, "error": "unknown_method"}, status=404)
        try:
            return web.json_response({"ok": True, "result": handlers[name]()})
        except (TypeError, ValueError, KeyError) as exc:
            return web.json_response({"ok": False, "error": f"invalid_arguments: {exc}"}, status=400)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="A local Slack Web API + Socket Mode server (tests, demos).")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--redeliver-after", type=float, default=3.0, help="seconds before an unacked resend")
    args = parser.parse_args(argv)
    stop_on = {signal.SIGINT, signal.SIGTERM}
    signal.pthread_sigmask(signal.SIG_BLOCK, stop_on)  # the server thread inherits the mask
    slack = LocalSlack(host=args.host, port=args.port, redeliver_after_s=args.redeliver_after).start()
    print(f"local Slack for @{slack.bot_name} ({slack.bot_user}): Web API at {slack.api_url}")
    print(f"SLACK_BOT_TOKEN={slack.bot_token} SLACK_APP_TOKEN={slack.app_token} (local test tokens)")
    print(f"test API at {slack.url}/_local/ (push_message, push_action, posts, acks, ...)")
    print("set [messengers.slack] base_url to the Web API URL", flush=True)
    try:
        signal.sigwait(stop_on)
    finally:
        slack.stop()


if __name__ == "__main__":
    main()
