"""The system prompt's blocks encoded once per text, not per request (issue 34, session 4).

The loop builds the system prompt for every model call: new section objects, mostly the same texts (GEODE.md,
the rules, the tool contract: ~16 KB), so an identity memo never hits. Encoding them to JSON on every request
cost more than comparing them: a block's encoded JSON is kept by its value (text and cache mark) for the
last few distinct blocks; an edited GEODE.md is a new text, encoded on its first request.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from typing import Any

KEPT = 16  # distinct blocks kept (a turn's stable sections and its recent dynamic ones)


class EncodedBlocks:
    """``items(blocks)``: each block dict as UTF-8 JSON (``json.dumps``'s bytes), kept by its value."""

    def __init__(self, kept: int = KEPT) -> None:
        self._kept = kept
        self._cache: OrderedDict[tuple[bool, str], bytes] = OrderedDict()
        self._lock = threading.Lock()
        self.encoded = 0  # blocks encoded (a work count for the tests)

    def items(self, blocks: list[dict[str, Any]]) -> list[bytes]:
        out = []
        for block in blocks:
            key = _key(block)
            with self._lock:
                hit = self._cache.get(key) if key is not None else None
                if hit is not None:
                    self._cache.move_to_end(key)  # type: ignore[arg-type]
            if hit is None:
                hit = json.dumps(block, ensure_ascii=False).encode()
                self.encoded += 1
                if key is not None:
                    with self._lock:
                        self._cache[key] = hit
                        while len(self._cache) > self._kept:
                            self._cache.popitem(last=False)
            out.append(hit)
        return out


def _key(block: dict[str, Any]) -> tuple[bool, str] | None:
    """A text block's key: its text, marked by its cache boundary; None for any other shape (not kept)."""
    text = block.get("text")
    if block.get("type") != "text" or not isinstance(text, str):
        return None
    rest = {k: v for k, v in block.items() if k not in ("type", "text")}
    if not rest:
        return (False, text)
    if rest == {"cache_control": {"type": "ephemeral"}}:
        return (True, text)
    return None
