"""An MCP tool's structured result carried as its JSON text (``{"structured_json": "<text>"}``), not a map.

msgpack's unpacker interns every str map key it unpacks and CPython 3.12's interned strings are immortal. A
structured result keyed by data (the MCP SDK makes a ``-> dict[str, X]`` return structured content keyed by
it: file names, user ids, dates) would leave each distinct key for good in every process that unpacks it: the
loop worker (the ``tools.call`` reply) and the store (the receipt, the timeline row). As a str value nothing
is interned. The executor's MCP handler carries it (:func:`carry`, after the bridge's redaction); the
masking's ``redacted`` counts go into the text, a field set afterwards (``operation_id``) beside it. Every
reader sees the same result as before: :func:`expand` gives the object back (hooks' ``tool_response``, the
secret masking, the receipt's and the timeline's bounded copies, the one-line summary) and :func:`render` the
text the model sees, character for character what ``json.dumps(result, ensure_ascii=False, default=str)``
made of the map (records written before, as maps, render as they did)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

KEY = "structured_json"
# json.dumps(value, ensure_ascii=False, default=str)'s encoder (the model's tool_result text), made once
TEXT = json.JSONEncoder(ensure_ascii=False, default=str)


def carry(value: Any) -> dict[str, Any]:
    """``value`` (JSON data) as its carried text."""
    return {KEY: TEXT.encode(value)}


def carried(content: Any) -> str | None:
    """The JSON text ``content`` carries, or None when it is not a carried result."""
    if content.__class__ is dict:
        text = content.get(KEY)
        if text.__class__ is str:
            return text  # type: ignore[no-any-return]
    return None


def expand(content: Any) -> Any:
    """The result as an object: a carried text decoded (``json.loads`` interns nothing) with the fields beside
    it set on it, as they were set on the map; anything else as it is."""
    text = carried(content)
    if text is None:
        return content
    try:
        value = json.loads(text)
    except ValueError:
        return content
    if len(content) == 1:
        return value
    if value.__class__ is not dict:
        return content
    value.update((k, v) for k, v in content.items() if k != KEY)
    return value


def render(content: Any) -> str:
    """The text the model sees of a result's content (the carried text as it is when nothing is beside it)."""
    if content.__class__ is str:
        return content  # type: ignore[no-any-return]
    text = carried(content)
    if text is not None and len(content) == 1:
        return text
    return TEXT.encode(expand(content))


def recarry(content: Any, change: Callable[[Any], Any]) -> Any:
    """``change`` applied to the result as an object; carried again when it was carried (a bounded or masked
    copy for a receipt or a timeline row)."""
    if carried(content) is None:
        return change(content)
    changed = change(expand(content))
    return carry(changed) if changed.__class__ is dict else changed
