"""Bounded context compaction: a model view of the durable history that fits the window.

The history itself is never rewritten (the checkpoint stays append-only). The view shortens old tool results,
then drops the oldest *units* (an assistant tool_use message travels with its tool_result message), so a
tool_use is never separated from its tool_result. The current turn's input onward is never dropped.
"""

from __future__ import annotations

import json

from geode.conversation import Message, TextBlock, ToolResultBlock, ToolUseBlock
from geode.loop.history_fold import HistoryFold
from geode.providers.identity_memo import IdentityMemo

CHARS_PER_TOKEN = 4
ELIDE_KEEP = 1500


class ContextExhausted(Exception):
    """Even the compacted view does not fit the window."""


IMAGE_TOKENS = 1600  # what a picture costs a model (Anthropic: about 1,600 tokens for a 1.15 MP image)


_SIZES: IdentityMemo[tuple[int, int]] = IdentityMemo()  # message -> (JSON characters, pictures)
_ELIDED: IdentityMemo[Message] = IdentityMemo()  # message -> its view with long tool results shortened


def message_size(m: Message) -> tuple[int, int]:
    """The JSON characters of ``m``'s blocks and its number of pictures, computed once per message object."""
    return _SIZES.get(m, _measure)


def _measure(m: Message) -> tuple[int, int]:
    return _json_chars(m), len(m.images)


_SPACED_FIELDS = {"text": 3, "image": 9, "tool_use": 7, "tool_result": 7}  # a block's ", " and ": " (2 k - 1)


def _json_chars(m: Message) -> int:
    """``len(json.dumps([b.model_dump() for b in m.content], ensure_ascii=False))``, from pydantic's compact
    JSON of each block (Rust: a long tool result's text is escaped ~3x faster) plus the one space
    ``json.dumps`` writes after each ``,`` and ``:`` (counted from the blocks' shapes). A value whose text the
    two encoders may write differently (a float) or that pydantic refuses (a lone surrogate) takes
    ``json.dumps`` itself."""
    try:
        chars = 2 * len(m.content) if m.content else 2  # "[", "]" and ", " between blocks
        for b in m.content:
            chars += len(b.__pydantic_serializer__.to_json(b).decode()) + _SPACED_FIELDS[b.type]
            if isinstance(b, ToolUseBlock):
                chars += _spaces(b.input)
        return chars
    except (_Unsure, KeyError, ValueError):
        return len(json.dumps([b.model_dump() for b in m.content], ensure_ascii=False))


class _Unsure(Exception):
    """A tool input value the two encoders may write differently (a float: ``1e-07`` / ``1e-7``; a key
    that is not a string; a type JSON lacks)."""


def _spaces(value: object) -> int:
    """The spaces ``json.dumps`` writes in ``value`` (a JSON value of dicts, lists, strings, numbers)."""
    if isinstance(value, dict):
        if not all(type(k) is str for k in value):
            raise _Unsure
        n = 2 * len(value) - 1 if value else 0
        return n + sum(_spaces(v) for v in value.values())
    if isinstance(value, list | tuple):
        return (len(value) - 1 if value else 0) + sum(_spaces(v) for v in value)
    if isinstance(value, float):
        raise _Unsure
    if isinstance(value, str | int | bool) or value is None:
        return 0
    raise _Unsure  # anything else: json.dumps decides (as before, it may refuse it)


def estimate_tokens(messages: list[Message]) -> int:
    """A rough count: JSON characters / CHARS_PER_TOKEN, plus IMAGE_TOKENS per picture (held by reference).

    Each message is measured once (:func:`message_size`), and a list that only grew since the last estimate
    on this thread adds only its new messages (:class:`~geode.loop.history_fold.HistoryFold`)."""
    chars, pictures = _TOTAL(messages)
    return chars // CHARS_PER_TOKEN + 1 + IMAGE_TOKENS * pictures


def _add_size(total: tuple[int, int], m: Message) -> tuple[int, int]:
    c, p = message_size(m)
    return total[0] + c, total[1] + p


_TOTAL: HistoryFold[tuple[int, int]] = HistoryFold(lambda: (0, 0), _add_size)


def units(history: list[Message]) -> list[list[Message]]:
    """Group messages: an assistant tool_use message and the next (tool_result) message are one unit."""
    out: list[list[Message]] = []
    i = 0
    while i < len(history):
        m = history[i]
        if m.role == "assistant" and m.tool_uses and i + 1 < len(history) and history[i + 1].tool_results:
            out.append([m, history[i + 1]])
            i += 2
        else:
            out.append([m])
            i += 1
    return out


def _elide(m: Message) -> Message:
    """``m`` with long tool results shortened; the same object for the same message every round."""
    if not any(isinstance(b, ToolResultBlock) and len(b.content) > 2 * ELIDE_KEEP for b in m.content):
        return m  # (never memoized as itself: the memo would keep the message alive)
    return _ELIDED.get(m, _elided)


def _elided(m: Message) -> Message:
    blocks = []
    for b in m.content:
        if isinstance(b, ToolResultBlock) and len(b.content) > 2 * ELIDE_KEEP:
            cut = len(b.content) - ELIDE_KEEP
            b = b.model_copy(update={"content": b.content[:ELIDE_KEEP] + f"\n[... {cut} chars elided]"})
        blocks.append(b)
    return m.model_copy(update={"content": tuple(blocks)})


def _current_turn_start(groups: list[list[Message]]) -> int:
    for idx in range(len(groups) - 1, -1, -1):
        first = groups[idx][0]
        if first.role == "user" and not first.tool_results:
            return idx
    return 0


def _with_note(kept: list[Message], n: int) -> list[Message]:
    """``kept`` led by the note saying ``n`` earlier messages were omitted."""
    note = TextBlock(text=f"[system:compaction] {n} earlier messages were omitted to fit the context window.")
    if kept and kept[0].role == "user":
        return [kept[0].model_copy(update={"content": (note, *kept[0].content)}), *kept[1:]]
    return [Message(role="user", content=(note,)), *kept]


def model_view(history: list[Message], *, budget_tokens: int, keep_recent: int = 10) -> list[Message]:
    """The messages to send: the whole history if it fits (the list itself, not a copy: the request takes
    its own tuple of it), else a bounded compaction of it."""
    if estimate_tokens(history) <= budget_tokens:
        return history
    recent_from = max(0, len(history) - keep_recent)
    view = [m if i >= recent_from else _elide(m) for i, m in enumerate(history)]
    if estimate_tokens(view) <= budget_tokens:
        return view
    groups = units(view)
    protected = _current_turn_start(groups)
    dropped = 0
    kept = view
    while dropped < protected and estimate_tokens(kept) > budget_tokens:  # the note counts too
        dropped += 1
        kept = _with_note([m for g in groups[dropped:] for m in g], sum(len(g) for g in groups[:dropped]))
    if estimate_tokens(kept) > budget_tokens:
        kept = [_elide(m) for m in kept]
        if estimate_tokens(kept) > budget_tokens:
            raise ContextExhausted(f"context needs ~{estimate_tokens(kept)} tokens, budget {budget_tokens}")
    return kept


def unanswered_tool_uses(messages: list[Message]) -> list[str]:
    """Tool_use ids not answered exactly once by the next message (empty = provider-valid)."""
    bad: list[str] = []
    for i, m in enumerate(messages):
        if m.role != "assistant" or not m.tool_uses:
            continue
        nxt = messages[i + 1] if i + 1 < len(messages) else None
        answers = [b.tool_use_id for b in (nxt.tool_results if nxt else [])]
        for tu in m.tool_uses:
            if answers.count(tu.id) != 1:
                bad.append(tu.id)
    return bad
