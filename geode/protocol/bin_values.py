"""The one check of a decoded frame's binary values, shared by the bus codec and the CLI's light wire (which
imports no pydantic model): bodies are JSON-shaped, so a bin value must at least be UTF-8 text."""

from __future__ import annotations

from typing import Any

from geode.protocol.errors import BadRequest


def refuse_non_text_bytes(obj: Any) -> None:
    """Raise ``BadRequest`` when a bin value anywhere in ``obj`` is not UTF-8 text (records dump bodies as
    JSON: a non-UTF-8 one used to pass validation and fail later, inside a store write, as ``internal``)."""
    stack = [obj]
    while stack:
        o = stack.pop()
        if isinstance(o, dict):
            stack.extend(o.keys())
            stack.extend(o.values())
        elif isinstance(o, list):
            stack.extend(o)
        elif isinstance(o, bytes):
            try:
                o.decode("utf-8")
            except UnicodeDecodeError:
                raise BadRequest("a binary value is not UTF-8 text (bodies are JSON-shaped)") from None
