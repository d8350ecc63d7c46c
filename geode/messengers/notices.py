"""Nothing ignored in silence: the poller's answers to messages it does not take as turns, and its ack.

- An *unhandled* message (too long, unreadable, or of a kind GEODE does not handle: a sticker, a voice note, a
  file ...) from an allowed sender in a bound chat gets one short receipted reply. For an unsupported kind the
  reply is sent at most once per chat per kind per ``NOTICE_EVERY_S``: the claim is stored (the poller's
  cursor table) **before** the reply is asked, so a crash loop cannot flood the chat; the message that holds
  the claim may ask again (its reply is receipted: a redelivery after a crash posts it at most once).
- The *ack reaction* (a binding's ``ack_reaction``): an emoji on each message taken as a turn, best effort, in
  the background (a failure is logged; the turn never waits for it).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any, Protocol

from geode.messengers.bindings import Bindings
from geode.messengers.config import MessengerBinding
from geode.messengers.journal import PollerState
from geode.messengers.model import InboundMessage, Unhandled
from geode.messengers.outbox import Outbox
from geode.messengers.schedule import PollerStatus
from geode.messengers.sessions import reply_operation_id, session_id_for, turn_id_for
from geode.protocol import messengers as messengers_msg

log = logging.getLogger(__name__)
NOTICE_EVERY_S = 3600.0


class _Settings(Protocol):
    @property
    def notice_every_s(self) -> float: ...
    @property
    def session_key(self) -> bytes: ...


class Poller(Protocol):
    """What these answers use of the poller (geode/messengers/poller.py)."""

    platform: str
    status: PollerStatus
    bindings: Bindings
    out: Outbox
    translator: Any

    @property
    def settings(self) -> _Settings: ...


def claim_notice(
    state: PollerState,
    chat_id: str,
    kind: str,
    message_id: str,
    *,
    now: float,
    every_s: float = NOTICE_EVERY_S,
) -> bool:
    """Whether ``message_id`` may answer "``kind`` is not supported" in the chat now: yes when no other
    message of that kind was answered there within ``every_s`` (the claim is then stored, durably, before
    any reply is asked), or when this very message holds the claim (a redelivery after a crash). Blocking."""
    slot = f"notice:{chat_id}:{kind}"
    at_text, _, holder = (state.get(slot) or "").partition(":")
    if holder == message_id:
        return True
    try:
        at = float(at_text)
    except ValueError:
        at = None
    if at is not None and 0 <= now - at < every_s:
        return False
    state.put(slot, f"{now:.3f}:{message_id}")
    return True


async def answer_unhandled(
    poller: Poller, item: Unhandled, *, clock: Callable[[], float] = time.time
) -> None:
    """The one path of a message GEODE does not handle: counted by ``label``; an allowed sender in a bound
    chat (a mention where the binding requires one) gets one short error, posted as a receipted reply (an
    unsupported kind at most once per chat per kind per hour); anyone else gets nothing. The caller then
    moves on."""
    platform = poller.platform
    poller.status.unhandled[item.label] += 1
    log.info("%s message %s not handled: %s", platform, item.message_id, item.label)
    binding = poller.bindings.find(platform, item.chat_id, item.thread_id) if item.chat_id else None
    if binding is None or item.from_bot or item.edited or not item.message_id:
        return
    if binding.allowed_senders and item.sender_id not in binding.allowed_senders:
        return
    if binding.require_mention and not item.mentioned:
        return
    state = poller.out.state
    assert state is not None
    key = item.channel_key
    if item.reason == "unsupported":
        claimed = await asyncio.to_thread(
            claim_notice,
            state,
            item.chat_id,  # per chat: a Slack channel's threads, a Telegram group's topics, share it
            item.kind,
            item.message_id,
            now=clock(),
            every_s=poller.settings.notice_every_s,
        )
        if not claimed:
            poller.status.unhandled["unsupported.quiet"] += 1  # answered in this chat within the hour
            return
    gen = await asyncio.to_thread(state.generation, key)
    turn_id = turn_id_for(platform, key, item.message_id)
    req = messengers_msg.DeliverReply(
        operation_id=reply_operation_id(turn_id),
        session_id=session_id_for(platform, key, gen, poller.settings.session_key),
        turn_id=turn_id,
        channel=f"{platform}:{key}",
        text=item.reply_text,
        reply_to=item.message_id,
    )
    poller.out.spawn(poller.out.command_reply(req))


def ack(poller: Poller, msg: InboundMessage, binding: MessengerBinding) -> None:
    """React with the binding's ``ack_reaction`` on a message taken as a turn: in the background, best effort
    (a platform without reactions, a refusal or a network error is logged and changes nothing)."""
    react = getattr(poller.translator, "react", None)
    if not binding.ack_reaction or react is None:
        return

    async def _react() -> None:
        try:
            await react(msg.channel_key, msg.message_id, binding.ack_reaction)
        except Exception as exc:  # best effort: the turn goes on
            log.info("%s ack reaction on %s not set: %s", poller.platform, msg.message_id, exc)

    poller.out.spawn(_react())
