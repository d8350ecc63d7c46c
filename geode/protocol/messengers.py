"""Messages of the messengers area: posting to a chat (``messenger.send``), delivering a turn's reply as a
receipted effect through the executor (``messenger.deliver``), and the operator's view of bindings.

Who serves what: the ``messengers`` child serves ``messenger.send``, ``messenger.send_file`` and
``messenger.bindings``; the executor serves ``messenger.deliver`` (it admits the receipt, asks the
``messengers`` child to post, commits).
"""

from __future__ import annotations

import re
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


class SendFile(BaseModel):
    """Executor → messengers child: post the file at ``path`` to the chat ``channel`` as an attachment. The
    executor read it through its file tools' roots and credential exclusions: ``size`` bytes whose sha256 is
    ``sha256``; the child posts only those bytes (a file changed since is refused, nothing posted).
    ``idempotency_key`` is the tool call's operation id."""

    channel: str = Field(min_length=1, max_length=256)
    path: str = Field(min_length=1, max_length=4096)
    filename: str = Field(min_length=1, max_length=255)
    size: int = Field(ge=0)
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    caption: str = Field(default="", max_length=1024)
    idempotency_key: str = Field(min_length=1, max_length=128)
    session_id: str = Field(default="", max_length=128)


class DeliverReply(BaseModel):
    """Messengers child → executor: post a turn's reply once. The receipt's operation id is
    ``operation_id`` (derived from the turn id), so a retry after any crash finds the same receipt."""

    operation_id: str = Field(min_length=1, max_length=128)
    session_id: str = Field(min_length=1, max_length=128)
    turn_id: str = Field(min_length=1, max_length=128)
    channel: str = Field(min_length=1, max_length=256)  # "<platform>:<channel key>", e.g. "telegram:42:7"
    text: str = Field(min_length=1, max_length=64 * 1024)
    reply_to: str = Field(default="", max_length=128)
    attempt: int = Field(default=1, ge=1, le=1_000_000)  # the first attempt the caller knows may be open


class Delivered(BaseModel):
    # posted: posted now · replayed: an earlier attempt posted it (nothing posted now) · uncertain: an earlier
    # attempt's outcome is unknown (nothing posted now; ``geode receipts --uncertain`` lists it) ·
    # deferred: known not posted (a 429, a 5xx, no connection); ask again at ``retry_at`` (wall clock) ·
    # not_sent: refused for good before anything was posted (``reason`` says why: chat gone, bot removed)
    state: Literal["posted", "replayed", "uncertain", "not_sent", "deferred"]
    message_ids: list[str] = Field(default_factory=list)
    reason: str = ""
    retry_at: float | None = None
    attempt: int = 1  # the attempt (receipt) this answer is about


_RETRY_HINT = re.compile(r"\(retry after ([0-9]+(?:\.[0-9]+)?) s\)")


def retry_hint(seconds: float) -> str:
    """The suffix of a ``messenger.send`` ``unavailable`` error that says when the post may be retried."""
    return f"(retry after {max(0.0, seconds):.1f} s)"


def hinted_retry(message: str) -> float | None:
    """The seconds of a :func:`retry_hint` in an error message, None when it has none."""
    m = _RETRY_HINT.search(message)
    return float(m.group(1)) if m else None


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
SEND_FILE = message("messenger.send_file", SendFile, MessageSent)
DELIVER = message("messenger.deliver", DeliverReply, Delivered)
BINDINGS = message("messenger.bindings", BindingsQuery, BindingsReply)
