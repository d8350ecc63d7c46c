"""The tool calls of one turn as its durable record says, for `geode ask --json`: read from the session's
checkpoint (a batch's results ride the next save, the turn's final save at the latest), never tallied from
events."""

from __future__ import annotations

import json
import os
import re
from typing import Any

from geode.conversation import Message
from geode.home import GeodeHome
from geode.loop.effect_ops import effect_operations

_ERROR_TYPE = re.compile(r'"error_type":\s*"([^"]+)"')
_INTERRUPTED = re.compile(r'"outcome":\s*"interrupted"')


def _error_type(text: str) -> str:
    """The ``error_type`` of a serialized error result (its JSON may carry a context note or be cut)."""
    try:
        body, _ = json.JSONDecoder().raw_decode(text)
    except ValueError:
        body = None
    if isinstance(body, dict) and isinstance(body.get("error_type"), str):
        return str(body["error_type"])
    hit = _ERROR_TYPE.search(text)
    return hit.group(1) if hit else "error"


def _of_turn(msg: Message, turn_id: str) -> bool:
    steps = [str(op.get("step_id", "")) for op in effect_operations(msg.metadata).values()]
    return any(s.startswith(f"{turn_id}:step-") for s in steps)


def turn_tool_calls(messages: list[dict[str, Any]], turn_id: str) -> list[dict[str, Any]]:
    """One row per tool call the turn's model proposed, in order: ``{id, name, error}`` where ``error`` is
    the result's error type (None: it succeeded; ``"no_result"``: no result was saved for it), plus
    ``outcome: "interrupted"`` for a command GEODE stopped after it began (it may have partly run)."""
    parsed = [Message.model_validate(m) for m in messages]
    rows: list[dict[str, Any]] = []
    for i, msg in enumerate(parsed):
        if msg.role != "assistant" or not msg.tool_uses or not _of_turn(msg, turn_id):
            continue
        answers: dict[str, Any] = {}
        for later in parsed[i + 1 :]:
            if later.role == "assistant":
                break
            answers.update({r.tool_use_id: r for r in later.tool_results})
        for use in msg.tool_uses:
            res = answers.get(use.id)
            error = "no_result" if res is None else (_error_type(res.content) if res.is_error else None)
            row: dict[str, Any] = {"id": use.id, "name": use.name, "error": error}
            if res is not None and res.is_error and _INTERRUPTED.search(res.content):
                row["outcome"] = "interrupted"
            rows.append(row)
    return rows


def fetch_turn_tool_calls(home: GeodeHome, session_id: str, turn_id: str) -> list[dict[str, Any]]:
    """The turn's tool calls from the record store (over the bus, as the records commands read it)."""
    from actors.bus import Bus
    from geode.records.store_client import StoreClient

    bus = Bus(f"cli-ask-{os.getpid()}", 1, home).start()
    try:
        restored = StoreClient(bus.transport, timeout_s=5.0, attempts=2).load_checkpoint(session_id)
    finally:
        bus.stop()
    return turn_tool_calls(restored.messages if restored is not None else [], turn_id)
