"""A turn's reply as chat text: the answer (or one line saying how the turn ended without one), split into
parts a platform accepts."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

TELEGRAM_LIMIT = 4096  # sendMessage text, in UTF-16 code units (what the Bot API counts)


def _units(text: str) -> int:
    """Length in UTF-16 code units: an emoji outside the BMP counts 2, as the platforms count it."""
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def _cut(line: str, limit: int) -> list[str]:
    """A line longer than ``limit`` cut hard into pieces of at most ``limit`` units (never inside a code
    point)."""
    pieces: list[str] = []
    start, used = 0, 0
    for i, ch in enumerate(line):
        w = 2 if ord(ch) > 0xFFFF else 1
        if used + w > limit:
            pieces.append(line[start:i])
            start, used = i, 0
        used += w
    pieces.append(line[start:])
    return pieces


def split_reply(text: str, limit: int = TELEGRAM_LIMIT) -> list[str]:
    """``text`` in parts of at most ``limit`` UTF-16 units, split on line boundaries (the newline at a split
    is dropped, and blank lines at either end of a part); a single line longer than the limit is cut hard.
    Parts that would be empty or only whitespace are left out, so ``[]`` for blank text."""
    if limit < 2:
        raise ValueError(f"limit must be >= 2, not {limit}")
    parts: list[str] = []
    cur: str | None = None
    for line in text.split("\n"):
        if _units(line) > limit:
            if cur is not None:
                parts.append(cur)
            *full, line = _cut(line, limit)
            parts.extend(full)
            cur = line
        elif cur is None:
            cur = line
        elif _units(cur) + 1 + _units(line) <= limit:
            cur = f"{cur}\n{line}"
        else:
            parts.append(cur)
            cur = line
    if cur is not None:
        parts.append(cur)
    return [p.strip("\n") for p in parts if p.strip()]  # blank lines at a split go with the split


def reply_text(outcome: Mapping[str, Any]) -> str:
    """What to post for a finished turn (``outcome`` = the turn record's outcome, a ``TurnResult`` dump):
    its answer, or one plain line saying how it ended without one. Error details are not posted (the chat
    is not the operator's log)."""
    text = outcome.get("text")
    if isinstance(text, str) and text.strip():
        return text
    reason = outcome.get("termination_reason") or "unknown"
    return f"The turn ended without an answer ({reason})."
