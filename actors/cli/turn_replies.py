"""What the CLI's control client makes of the daemon's answers while it follows a turn: a ping reply saying
control restarted, the durable outcomes of an incomplete replay, a cancel it stopped waiting on."""

from __future__ import annotations

from typing import Any

from actors.cli import wire_data as lanes_msg
from actors.cli.wire import Frame
from geode.protocol.errors import ErrorCode


def cancel_pending(turn_id: str) -> dict[str, Any]:
    """What ``follow`` returns when it stops waiting for a turn it cancelled (the daemon ends it)."""
    return {
        "termination_reason": "user_cancelled",
        "turn_id": turn_id,
        "cancel_pending": True,
        "error": "cancel sent; the daemon is ending the turn",
    }


def unknown_to(env: Frame) -> bool:
    """A ping's reply saying the control child does not know this connection (it restarted)."""
    if env.kind == "ok":
        return env.body.get("ok") is False
    return env.kind == "error" and env.body.get("code") == ErrorCode.NOT_READY.value


def durable_outcomes(reply: dict[str, Any], sid: str) -> list[dict[str, Any]]:
    """When the replay did not reach back (lanes restarted), the turns' durable outcomes as done events."""
    if reply.get("complete", True):
        return []
    return [
        {
            "session_id": sid,
            "turn_id": o["turn_id"],
            "seq": 0,
            "kind": lanes_msg.TURN_DONE,
            "data": {"result": o["outcome"]},
        }
        for o in reply.get("outcomes", [])
        if o.get("outcome") is not None and o.get("turn_id")
    ]
