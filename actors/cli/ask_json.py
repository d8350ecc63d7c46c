"""The answer object of `geode ask --json`: one builder, also the last line of ``--output-format
stream-json`` (actors/cli/stream_json.py adds ``"type": "result"`` to the very same object)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from geode.protocol.errors import GeodeError

if TYPE_CHECKING:
    from geode.home import GeodeHome


def answer_object(
    home: GeodeHome, session_id: str | None, result: dict[str, Any], unasked: list[str], code: int
) -> dict[str, Any]:
    """The turn's answer: its text, ids, termination, the tool calls of its durable record, rounds, usage,
    error, the tools that needed approval with nobody to ask, and the command's exit code."""
    return {
        "text": result.get("text", ""),
        "session_id": session_id,
        "turn_id": result.get("turn_id"),
        "termination_reason": result.get("termination_reason"),
        **recorded_tool_calls(home, session_id, result.get("turn_id")),
        "rounds": result.get("rounds", 0),
        "usage": result.get("usage", {}),
        "error": result.get("error"),
        "approvals_unasked": list(unasked),  # needed approval, nobody could be asked: not run
        "exit_code": code,
    }


def continues_object(
    turn_id: str, session_id: str, accepted: bool, message: str, code: int
) -> dict[str, Any]:
    """The client stopped waiting, the turn did not (exit 4): which turn, and why the client gave up."""
    return {
        "turn_id": turn_id,
        "session_id": session_id,
        "termination_reason": None,
        "continues": True,
        "accepted": accepted,
        "error": message,
        "exit_code": code,
    }


def recorded_tool_calls(home: GeodeHome, session_id: str | None, turn_id: str | None) -> dict[str, Any]:
    """``tool_calls`` and ``tool_call_count`` of the answer, from the turn's durable record (the session's
    checkpoint); when the store does not answer both are null and ``tool_calls_error`` says why."""
    from actors.cli.turn_tools import fetch_turn_tool_calls

    try:
        calls = fetch_turn_tool_calls(home, session_id or "", turn_id or "")
    except GeodeError as exc:
        return {"tool_calls": None, "tool_call_count": None, "tool_calls_error": str(exc)}
    return {"tool_calls": calls, "tool_call_count": len(calls)}
