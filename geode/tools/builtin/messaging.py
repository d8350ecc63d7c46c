"""send_message: posts through a messenger (receipted, locked per (channel, recipient)).

The executor's ``messengers`` service is either a map of platform adapters (tests) or one sender for every
platform: in the daemon, :class:`BusMessenger`, which asks the ``messengers`` child (``messenger.send``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from geode.protocol import messengers as messengers_msg
from geode.protocol.errors import BadRequest, Unavailable
from geode.protocol.transport import Transport
from geode.tools.handlers import ToolEnv, ToolFailure
from geode.tools.reply_delivery import MessengersLost


class MessengerAdapter(Protocol):
    """One platform's sender. ``idempotency_key`` is the operation id: the same key must never post twice."""

    def send(self, channel: str, recipient: str, text: str, *, idempotency_key: str) -> dict[str, Any]: ...


class BusMessenger:
    """Every platform through the ``messengers`` child. A refusal there (no platform enabled, a bad
    request) is a clean "not sent"; a timeout or the child dying mid-post propagates, so the receipt is left
    uncertain."""

    def __init__(self, transport: Transport, target: str = "messengers", timeout_s: float = 30.0) -> None:
        self.transport = transport
        self.target = target
        self.timeout_s = timeout_s

    def send(self, channel: str, recipient: str, text: str, *, idempotency_key: str) -> dict[str, Any]:
        body = messengers_msg.SendMessage(
            channel=channel, recipient=recipient, text=text, idempotency_key=idempotency_key
        )
        try:
            reply = self.transport.call(self.target, messengers_msg.SEND, body, timeout_s=self.timeout_s)
        except MessengersLost:  # the child died with the post in flight: it may have posted (uncertain)
            raise
        except (Unavailable, BadRequest) as exc:
            raise ToolFailure(
                f"Not sent: {exc.message}. Nothing was posted to {channel!r}.", "tool_unavailable"
            ) from None
        out = messengers_msg.MessageSent.model_validate(reply)
        return out.model_dump(exclude_defaults=True) | {"platform": out.platform}

    def send_file(self, channel: str, path: str, **fields: Any) -> dict[str, Any]:
        """``messenger.send_file`` (``fields``: filename, size, sha256, caption, idempotency_key,
        session_id); a refusal is a clean "not sent", a lost child or a timeout propagates (uncertain)."""
        body = messengers_msg.SendFile(channel=channel, path=path, **fields)
        try:
            reply = self.transport.call(
                self.target, messengers_msg.SEND_FILE, body, timeout_s=self.timeout_s + 30
            )
        except MessengersLost:
            raise
        except (Unavailable, BadRequest) as exc:
            raise ToolFailure(
                f"Not sent: {exc.message}. Nothing was posted to {channel!r}.", "tool_unavailable"
            ) from None
        out = messengers_msg.MessageSent.model_validate(reply)
        return out.model_dump(exclude_defaults=True) | {"platform": out.platform}


def platform_of(channel: str) -> str:
    """``"slack:C123"`` → ``"slack"``."""
    return channel.split(":", 1)[0] if ":" in channel else channel


def send_message(args: dict[str, Any], env: ToolEnv) -> dict[str, Any]:
    messengers: Any = env.service("messengers") or {}
    channel, recipient, text = args["channel"], args["recipient"], args["text"]
    if isinstance(messengers, Mapping):
        adapter: MessengerAdapter | None = messengers.get(platform_of(channel))
        if adapter is None:
            known = ", ".join(sorted(messengers)) or "none"
            raise ToolFailure(
                f"Messaging is unavailable for {platform_of(channel)!r} (adapters: {known}); not sent.",
                "tool_unavailable",
            )
    else:
        adapter = messengers
    receipt = adapter.send(channel, recipient, text, idempotency_key=env.ctx.operation_id)
    return {"sent": True, "channel": channel, "recipient": recipient, **dict(receipt or {})}
