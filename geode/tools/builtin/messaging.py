"""send_message: posts through a messenger adapter (receipted, locked per (channel, recipient))."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from geode.tools.handlers import ToolEnv, ToolFailure


class MessengerAdapter(Protocol):
    """One platform's sender. ``idempotency_key`` is the operation id: the same key must never post twice."""

    def send(self, channel: str, recipient: str, text: str, *, idempotency_key: str) -> dict[str, Any]: ...


def platform_of(channel: str) -> str:
    """``"slack:C123"`` → ``"slack"``."""
    return channel.split(":", 1)[0] if ":" in channel else channel


def send_message(args: dict[str, Any], env: ToolEnv) -> dict[str, Any]:
    adapters: Mapping[str, MessengerAdapter] = env.service("messengers") or {}
    channel, recipient, text = args["channel"], args["recipient"], args["text"]
    adapter = adapters.get(platform_of(channel))
    if adapter is None:
        known = ", ".join(sorted(adapters)) or "none"
        raise ToolFailure(
            f"Messaging is unavailable for {platform_of(channel)!r} (adapters: {known}); not sent.",
            "tool_unavailable",
        )
    receipt = adapter.send(channel, recipient, text, idempotency_key=env.ctx.operation_id)
    return {"sent": True, "channel": channel, "recipient": recipient, **dict(receipt or {})}
