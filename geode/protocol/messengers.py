"""Messages of the messengers area: posting to a chat (``messenger.send``), delivering a turn's reply as a
receipted effect through the executor (``messenger.deliver``), and the operator's view of bindings.

Who serves what: the ``messengers`` child serves ``messenger.send`` and ``messenger.bindings``; the executor
serves ``messenger.deliver`` (it admits the receipt, asks the ``messengers`` child to post, commits).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from geode.protocol.catalog import message


class SendMessage(BaseModel):
    """Post ``text`` to ``recipient`` on ``channel`` (``"<platform>:<id>"``). ``idempotency_key`` is the
    tool call's operation id: a platform must never post the same key twice."""

    channel: str = Field(min_length=1, max_length=256)
    recipient: str = Field(min_length=1, max_length=256)
    text: str = Field(min_length=1, max_length=64 * 1024)
    idempotency_key: str = Field(min_length=1, max_length=128)
    session_id: str = Field(default="", max_length=128)
    reply_to: str = Field(default="", max_length=128)  # the platform message id this post answers


class MessageSent(BaseModel):
    platform: str
    message_id: str = ""  # the platform's id of the (first) posted message
    message_ids: list[str] = Field(default_factory=list)  # every part of a split reply
    duplicate: bool = False  # the key was seen before: nothing was posted this time


class DeliverReply(BaseModel):
    """Messengers child → executor: post a turn's reply once. The receipt's operation id is
    ``operation_id`` (derived from the turn id), so a retry after any crash finds the same receipt."""

    operation_id: str = Field(min_length=1, max_length=128)
    session_id: str = Field(min_length=1, max_length=128)
    turn_id: str = Field(min_length=1, max_length=128)
    channel: str = Field(min_length=1, max_length=256)  # "<platform>:<channel key>", e.g. "telegram:42:7"
    text: str = Field(min_length=1, max_length=64 * 1024)
    reply_to: str = Field(default="", max_length=128)


class Delivered(BaseModel):
    # posted: posted now · replayed: an earlier attempt posted it (nothing posted now) · uncertain: an earlier
    # attempt's outcome is unknown (nothing posted now; ``geode receipts --uncertain`` lists it) ·
    # not_sent: refused before anything was posted (``reason`` says why; a later retry may post)
    state: Literal["posted", "replayed", "uncertain", "not_sent"]
    message_ids: list[str] = Field(default_factory=list)
    reason: str = ""


class BindingsQuery(BaseModel):
    """The configured bindings with each one's current session (``geode messengers``)."""


class BindingView(BaseModel):
    platform: str
    channel_id: str
    session_id: str = ""
    require_mention: bool = False
    allowed_senders: list[str] = Field(default_factory=list)
    last_turn: dict[str, Any] | None = None  # {turn_id, state, termination_reason, updated_at}


class BindingsReply(BaseModel):
    bindings: list[BindingView] = Field(default_factory=list)
    platforms: list[dict[str, Any]] = Field(default_factory=list)  # the pollers, as in runtime.status


SEND = message("messenger.send", SendMessage, MessageSent)
DELIVER = message("messenger.deliver", DeliverReply, Delivered)
BINDINGS = message("messenger.bindings", BindingsQuery, BindingsReply)
