"""The outbound half of the Discord translator: replies (split at 2,000 characters, replying to the message,
with an enforced nonce), approval buttons, answers to a press, edits and typing, over discord.py's REST
client. Mixed into :class:`geode.messengers.discord.DiscordTranslator`."""

from __future__ import annotations

import asyncio
import secrets
import warnings
from collections import OrderedDict
from typing import Any

from geode.messengers.discord_errors import discord_call
from geode.messengers.discord_observe import find_discord_reply
from geode.messengers.discord_uploads import attach_file
from geode.messengers.errors import PlatformError, Rejected
from geode.messengers.observe import LookFor
from geode.messengers.replies import split_reply

# discord.py's voice player imports audioop (deprecated since 3.11); GEODE uses no voice
with warnings.catch_warnings():
    warnings.filterwarnings("ignore", "'audioop' is deprecated", DeprecationWarning)
    import discord
    from discord.http import MultipartParameters

MAX_CONTENT = 2000
MAX_CUSTOM_ID = 100
SUPPRESS_NOTIFICATIONS = 1 << 12  # a message flag: posted without a push or desktop notification
NO_PINGS = {"parse": [], "replied_user": False}  # a reply never pings @everyone, roles, users


class DiscordPosts:
    """Posting for the translator: its discord.py client (None until started) and the presses not answered
    yet (``callback id -> (interaction, its acknowledgement task)``)."""

    _client: discord.Client | None
    bot_id: str
    _presses: OrderedDict[str, tuple[discord.Interaction, asyncio.Task[None]]]

    async def send_text(self, channel_key: str, text: str, *, reply_to: str = "") -> list[str]:
        """Post ``text`` in the channel (or its thread), the first part replying to ``reply_to``, split at
        2000 characters on line boundaries. Returns the posted message ids."""
        channel = _target(channel_key)
        http = self._http()
        posted: list[str] = []
        for part in split_reply(text, MAX_CONTENT):
            # a nonce Discord enforces: discord.py's own retry of this POST (after a 5xx or a reset
            # connection) returns the message already created instead of posting it twice
            payload: dict[str, Any] = {"content": part, "allowed_mentions": NO_PINGS, **_once()}
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
            "content": text[:MAX_CONTENT], "components": components, "allowed_mentions": NO_PINGS, **_once(),
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
        payload = {"content": text[:MAX_CONTENT], "components": [], "allowed_mentions": NO_PINGS}
        channel = _target(channel_key)
        await discord_call(
            "edit_message", self._http().edit_message(channel, int(message_id), params=_params(payload))
        )

    async def send_file(
        self, channel_key: str, filename: str, data: bytes, *, caption: str = ""
    ) -> list[str]:
        """Post ``data`` as an attachment in the channel (or its thread), ``caption`` its text."""
        return await attach_file(self._http(), _target(channel_key), filename, data, caption)

    async def send_status(self, channel_key: str, text: str, *, reply_to: str = "") -> str:
        """A live-progress message with notifications off (flag SUPPRESS_NOTIFICATIONS) in the channel or
        thread; its message id. Not a reply to ``reply_to``: the final answer is the reply."""
        channel = _target(channel_key)
        payload: dict[str, Any] = {
            "content": text[:MAX_CONTENT], "flags": SUPPRESS_NOTIFICATIONS, "allowed_mentions": NO_PINGS,
            **_once(),
        }  # fmt: skip
        sent = await discord_call("send_message", self._http().send_message(channel, params=_params(payload)))
        return str(sent["id"])

    async def delete(self, channel_key: str, message_id: str) -> None:
        """Delete one of the bot's messages; one already gone (404 Unknown Message) is fine."""
        try:
            await discord_call(
                "delete_message", self._http().delete_message(_target(channel_key), int(message_id))
            )
        except Rejected as exc:
            if "HTTP 404" not in str(exc):
                raise

    async def typing(self, channel_key: str) -> None:
        """Show "<bot> is typing…" in the channel (or thread) for about 10 s."""
        await discord_call("typing", self._http().send_typing(_target(channel_key)))

    async def find_reply(self, look: LookFor) -> str | None:
        """The id of the bot's post of an uncertain reply (author, reply reference, text), else None."""
        found = find_discord_reply(self._http(), _target(look.channel_key), look, bot_id=self.bot_id)
        return await discord_call("get_messages", found)

    async def react(self, channel_key: str, message_id: str, emoji: str) -> None:
        """The ack reaction on a received message (a unicode emoji, or ``name:id`` of a custom one)."""
        add = self._http().add_reaction(_target(channel_key), int(message_id), emoji)
        await discord_call("add_reaction", add)

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
