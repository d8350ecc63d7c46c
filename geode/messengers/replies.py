"""A turn's reply as chat text: the answer (or one line saying how the turn ended without one), split into
parts a platform accepts."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

TELEGRAM_LIMIT = 4096  # sendMessage text, in UTF-16 code units (what the Bot API counts)
DISCORD_LIMIT = 2000  # a message's content
SLACK_LIMIT = 4000  # chat.postMessage text: Slack truncates past 40,000 and advises staying under 4,000
FENCE = re.compile(r"^\s*(`{3,}|~{3,})")
LIMITS = {"telegram": TELEGRAM_LIMIT, "slack": SLACK_LIMIT, "discord": DISCORD_LIMIT}


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


def _lines(lines: list[str], limit: int) -> list[str]:
    """``lines`` packed into parts of at most ``limit`` units on line boundaries; a longer line is cut hard
    (its rest goes on with what follows)."""
    parts: list[str] = []
    cur: str | None = None
    for line in lines:
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
    return parts


def _blocks(lines: list[str]) -> list[tuple[int, int, str]]:
    """The paragraphs (runs of non-blank lines) and fenced code blocks (blank lines inside kept) of
    ``lines``, as ``(start, end, fence)``: ``fence`` is a code block's opening marker, "" a paragraph's."""
    blocks: list[tuple[int, int, str]] = []
    start, fence = -1, ""
    for i, line in enumerate(lines):
        mark = FENCE.match(line)
        if fence:
            if mark and mark.group(1)[0] == fence[0] and not line.strip().strip(fence[0]):
                blocks.append((start, i + 1, fence))
                start, fence = -1, ""
            continue
        if mark:
            if start >= 0:
                blocks.append((start, i, ""))
            start, fence = i, mark.group(1)
        elif not line.strip():
            if start >= 0:
                blocks.append((start, i, ""))
            start = -1
        elif start < 0:
            start = i
    if start >= 0:
        blocks.append((start, len(lines), fence))  # an unclosed fence runs to the end
    return blocks


def _code(lines: list[str], fence: str, limit: int) -> list[str]:
    """A fenced code block longer than ``limit`` in parts, each closed and opened again, so every part
    renders as code; a limit too small for the fences splits it as plain lines."""
    opening, close = lines[0], fence[0] * len(fence)
    body = lines[1:-1] if len(lines) > 1 and FENCE.match(lines[-1]) else lines[1:]
    room = limit - _units(opening) - _units(close) - 2
    if room < 16:
        return _lines(lines, limit)
    return [f"{opening}\n{chunk}\n{close}" for chunk in _lines(body, room) if chunk.strip()]


def split_reply(text: str, limit: int = TELEGRAM_LIMIT) -> list[str]:
    """``text`` in parts of at most ``limit`` UTF-16 units: whole paragraphs (blank-line separated) and whole
    fenced code blocks packed together while they fit; a paragraph longer than the limit splits on line
    boundaries (a single longer line is cut hard), a longer code block is closed at each split and opened
    again in the next part. The blank lines at a split are dropped; parts that would be empty or only
    whitespace are left out, so ``[]`` for blank text."""
    if limit < 2:
        raise ValueError(f"limit must be >= 2, not {limit}")
    if _units(text) <= limit:
        return [text.strip("\n")] if text.strip() else []
    lines = text.split("\n")
    parts: list[str] = []
    cur: tuple[int, int] | None = None  # the line range of the part being filled
    for start, end, fence in _blocks(lines):
        if cur is not None and _units("\n".join(lines[cur[0] : end])) <= limit:
            cur = (cur[0], end)
            continue
        if cur is not None:
            parts.append("\n".join(lines[cur[0] : cur[1]]))
            cur = None
        if _units("\n".join(lines[start:end])) <= limit:
            cur = (start, end)
        elif fence:
            parts.extend(_code(lines[start:end], fence, limit))
        else:
            parts.extend(_lines(lines[start:end], limit))
    if cur is not None:
        parts.append("\n".join(lines[cur[0] : cur[1]]))
    return [p.strip("\n") for p in parts if p.strip()]


def text_limit(platform: str) -> int:
    """The most one message of ``platform`` takes (a final answer is split at it)."""
    return LIMITS.get(platform, TELEGRAM_LIMIT)


def reply_text(outcome: Mapping[str, Any]) -> str:
    """What to post for a finished turn (``outcome`` = the turn record's outcome, a ``TurnResult`` dump):
    its answer, or one plain line saying how it ended without one. Error details are not posted (the chat
    is not the operator's log)."""
    text = outcome.get("text")
    if isinstance(text, str) and text.strip():
        return text
    reason = outcome.get("termination_reason") or "unknown"
    return f"The turn ended without an answer ({reason})."
