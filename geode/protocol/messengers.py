"""Messages of the messengers area: the executor's ``send_message`` asks the ``messengers`` child to post.

Until a platform is enabled (issue 13) the child answers every ``messenger.send`` with ``unavailable``.
"""

from __future__ import annotations

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


class MessageSent(BaseModel):
    platform: str
    message_id: str = ""  # the platform's id of the posted message
    duplicate: bool = False  # the key was seen before: nothing was posted this time


SEND = message("messenger.send", SendMessage, MessageSent)
