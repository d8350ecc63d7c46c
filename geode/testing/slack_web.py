"""The Web API methods of the local Slack server (auth.test, apps.connections.open, chat.*, reactions.add):
each one checks its parameters like Slack does and returns the fields of the ``{"ok": true, ...}`` reply."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Protocol

from geode.testing import slack_events as ev
from geode.testing.slack_events import JSON, SlackError
from geode.testing.slack_history import conversations_history, conversations_replies, store_metadata
from geode.testing.slack_socket import SocketHub
from geode.testing.slack_uploads import SlackUploads, complete_upload, get_upload_url

BOT = "bot"  # the kinds of token a method needs
APP = "app"


class Workspace(Protocol):
    """What a Web API method reads and changes of the fake workspace (``slack_server.LocalSlack`` is one);
    a method runs with the workspace's lock held."""

    bot_user: str
    bot_name: str
    bot_id: str
    echo_bot_posts: bool
    hub: SocketHub
    _clock: ev.Clock
    _messages: dict[tuple[str, str], JSON]
    _posts: list[tuple[str, str]]
    _ephemeral: list[JSON]
    _reactions: list[JSON]
    uploads: SlackUploads  # files_upload_v2's files and shares (slack_uploads)

    @property
    def ws_url(self) -> str: ...

    @property
    def url(self) -> str: ...

    def _queue_event(self, event: JSON) -> JSON: ...


def _channel(params: JSON) -> str:
    channel = params.get("channel")
    if not channel:
        raise SlackError("channel_not_found")
    if not isinstance(channel, str) or not ev.CHANNEL_ID.match(channel):
        raise SlackError("channel_not_found")
    return channel


def _blocks(params: JSON) -> list[JSON] | None:
    """``blocks`` as JSON (slack_sdk sends a JSON body) or as a JSON string in a form."""
    blocks = params.get("blocks")
    if isinstance(blocks, str):
        try:
            blocks = json.loads(blocks) if blocks else None
        except ValueError as exc:
            raise SlackError("invalid_blocks_format") from exc
    return blocks


def _text(params: JSON) -> str:
    text = params.get("text")
    return text if isinstance(text, str) else ""


def auth_test(slack: Workspace, params: JSON) -> JSON:
    return {
        "url": "https://geode-local.slack.com/",
        "team": "GEODE Local",
        "user": slack.bot_name,
        "team_id": ev.TEAM_ID,
        "user_id": slack.bot_user,
        "bot_id": slack.bot_id,
        "is_enterprise_install": False,
    }


def connections_open(slack: Workspace, params: JSON) -> JSON:
    ticket = ev.Clock.ticket()
    slack.hub.tickets.add(ticket)
    return {"url": f"{slack.ws_url}?ticket={ticket}&app_id={ev.APP_ID}"}


def post_message(slack: Workspace, params: JSON) -> JSON:
    channel, blocks, text = _channel(params), _blocks(params), _text(params)
    ev.check_message(text, blocks)
    thread_ts = str(params["thread_ts"]) if params.get("thread_ts") else None
    ts = slack._clock.ts()
    msg = ev.bot_message(
        channel=channel,
        bot_user=slack.bot_user,
        bot_id=slack.bot_id,
        text=text,
        ts=ts,
        thread_ts=thread_ts,
        blocks=ev.with_block_ids(blocks),
    )
    store_metadata(msg, params)
    slack._messages[(channel, ts)] = msg
    slack._posts.append((channel, ts))
    if slack.echo_bot_posts:
        slack._queue_event(dict(msg))
    reply = {k: v for k, v in msg.items() if k != "channel"}
    return {"channel": channel, "ts": ts, "message": reply}


def update(slack: Workspace, params: JSON) -> JSON:
    channel, ts = _channel(params), str(params.get("ts") or "")
    msg = slack._messages.get((channel, ts))
    if msg is None:
        raise SlackError("message_not_found")
    if msg.get("user") != slack.bot_user:
        raise SlackError("cant_update_message")
    blocks, text = _blocks(params), params.get("text")
    ev.check_message(text if text is not None else msg.get("text"), blocks)
    if text is not None:
        msg["text"] = text
    if blocks is not None:
        msg["blocks"] = ev.with_block_ids(blocks) or []
    msg["edited"] = {"user": slack.bot_user, "ts": slack._clock.ts()}
    return {"channel": channel, "ts": ts, "text": msg["text"], "message": dict(msg)}


def delete(slack: Workspace, params: JSON) -> JSON:
    """chat.delete of one of the bot's messages: gone from the channel (``posts()`` and the history)."""
    channel, ts = _channel(params), str(params.get("ts") or "")
    msg = slack._messages.get((channel, ts))
    if msg is None:
        raise SlackError("message_not_found")
    if msg.get("user") != slack.bot_user:
        raise SlackError("cant_delete_message")
    del slack._messages[(channel, ts)]
    return {"channel": channel, "ts": ts}


def post_ephemeral(slack: Workspace, params: JSON) -> JSON:
    channel, text, blocks = _channel(params), _text(params), _blocks(params)
    user = params.get("user")
    if not user:
        raise SlackError("user_not_in_channel")
    ev.check_message(text, blocks)
    ts = slack._clock.ts()
    slack._ephemeral.append(
        {"channel": channel, "user": user, "text": text, "thread_ts": params.get("thread_ts"), "ts": ts}
    )
    return {"message_ts": ts}


def reactions_add(slack: Workspace, params: JSON) -> JSON:
    channel, ts, name = _channel(params), str(params.get("timestamp") or ""), params.get("name")
    if (channel, ts) not in slack._messages:
        raise SlackError("message_not_found")
    if not name:
        raise SlackError("invalid_name")
    reaction = {"channel": channel, "ts": ts, "name": name}
    if reaction in slack._reactions:
        raise SlackError("already_reacted")
    slack._reactions.append(reaction)
    return {}


Method = Callable[[Workspace, JSON], JSON]
METHODS: dict[str, tuple[str, Method]] = {
    "auth.test": (BOT, auth_test),
    "apps.connections.open": (APP, connections_open),
    "chat.postMessage": (BOT, post_message),
    "chat.update": (BOT, update),
    "chat.delete": (BOT, delete),
    "chat.postEphemeral": (BOT, post_ephemeral),
    "reactions.add": (BOT, reactions_add),
    "files.getUploadURLExternal": (BOT, get_upload_url),
    "files.completeUploadExternal": (BOT, complete_upload),
    "conversations.history": (BOT, conversations_history),
    "conversations.replies": (BOT, conversations_replies),
}


def token_kind(token: str, *, bot_token: str, app_token: str) -> str:
    """Which of the app's tokens ``token`` is; raises ``not_authed`` / ``invalid_auth``."""
    if not token:
        raise SlackError("not_authed")
    if token == bot_token:
        return BOT
    if token == app_token:
        return APP
    raise SlackError("invalid_auth")


def check_token(method: str, kind: str) -> None:
    needed = METHODS[method][0] if method in METHODS else BOT
    if kind != needed:
        raise SlackError("not_allowed_token_type")


def params_of(query: Any, form: Any, body: Any) -> JSON:
    """Query, form and JSON body parameters merged (the body wins)."""
    params: JSON = dict(query)
    params.update({k: v for k, v in (form or {}).items() if isinstance(v, str)})
    if isinstance(body, dict):
        params.update(body)
    return params
