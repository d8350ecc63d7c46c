"""Summarizing compaction: when the model view nears the window, the session's model summarizes what the view
would drop (one bounded call) and the summary is stored ONCE as a compaction record in the durable history.

The record is an appended message (``metadata.origin == "compaction"``, ``covers`` = how many history
messages it summarizes, ``compaction_id`` = the idempotent key of that compaction point); the history stays
append-only. :func:`effective_history` is what the view is built from: the latest summary, then the
messages after the point it covers. Anything that goes wrong (the call fails or times out, a PreCompact hook
blocks, the answer is empty) leaves the deterministic view of :mod:`geode.loop.compaction`, the floor.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

from geode.conversation import Message, TextBlock
from geode.loop.compaction import CHARS_PER_TOKEN, ELIDE_KEEP, estimate_tokens
from geode.loop.history_fold import HistoryFold
from geode.providers.identity_memo import IdentityMemo
from geode.providers.types import ModelRequest, ModelResponse, Provider, SystemSection

log = logging.getLogger(__name__)

ORIGIN = "compaction"
TAG = "[system:compaction-summary]"
HEADER = " A summary of the earlier conversation (the messages it covers are not shown):"
INSTRUCTIONS = (
    "You are compacting a long agent conversation so it fits the model's context window. Write a structured "
    "summary of the transcript you are given (and of the earlier summary, if any), for the same agent to "
    "continue the work from. Use exactly these headings: '## Goal' (what the user wants), '## Decisions' "
    "(what was decided or learned, with the reasons), '## Files touched' (paths and what changed), "
    "'## Open items' (what is left, pending questions). Be specific: names, paths, numbers, commands. "
    "Write only the summary."
)


REQUEST_KEEP = 4000  # the current turn's request, when a compaction cuts inside the turn
TEXT_KEEP = 4 * ELIDE_KEEP  # one message's share of the transcript the summarizer reads


class SummaryFailed(Exception):
    """The summary call failed, timed out or answered nothing; the deterministic view is used."""


def is_record(m: Message) -> bool:
    return m.role == "user" and m.metadata.get("origin") == ORIGIN


def records_of(history: list[Message]) -> list[Message]:
    return [m for m in history if is_record(m)]


def _note_record(state: tuple[int, tuple[int, ...]], m: Message) -> tuple[int, tuple[int, ...]]:
    """(messages seen, the indices of the compaction records among them)."""
    n, where = state
    return n + 1, (*where, n) if is_record(m) else where


_RECORD_AT: HistoryFold[tuple[int, tuple[int, ...]]] = HistoryFold(lambda: (0, ()), _note_record)


def _covers(record: Message | None) -> int:
    return int(record.metadata.get("covers", 0)) if record is not None else 0


def effective_history(history: list[Message]) -> list[Message]:
    """The history as the model sees it before the floor: the latest summary (merged into the first kept user
    message, or a user message of its own), then every non-record message after the point it covers.

    The summary's message is the same object every round (kept beside the message it leads, or the record),
    so what is derived from the view by identity (its encoded body, its token estimate) is reused; the kept
    messages are sliced around the folded records' indices, not filtered one by one."""
    where = _RECORD_AT(history)[1]  # folded: a round pays only for its new messages
    if not where:
        return history  # itself, not a copy (its callers only read it): no pass over a long history
    latest = history[where[-1]]
    rest: list[Message] = []
    at = _covers(latest)
    for r in where:
        if r >= at:
            rest += history[at:r]
            at = r + 1
    rest += history[at:]
    if rest and rest[0].role == "user" and not rest[0].tool_results:
        text, led = _LED.get(rest[0], partial(_led, latest.text))
        rest[0] = led if text == latest.text else _led(latest.text, rest[0])[1]
    else:
        rest.insert(0, _NOTE.get(latest, _note))
    return rest


def _led(text: str, first: Message) -> tuple[str, Message]:
    return text, first.model_copy(update={"content": (TextBlock(text=text), *first.content)})


def _note(record: Message) -> Message:
    return Message(role="user", content=(TextBlock(text=record.text),))


_LED: IdentityMemo[tuple[str, Message]] = IdentityMemo()  # a kept first message -> (summary, it led by it)
_NOTE: IdentityMemo[Message] = IdentityMemo()  # a record -> its summary as a user message of its own


def _turn_start(m: Message) -> bool:
    return m.role == "user" and not m.tool_results and m.metadata.get("origin", "user_input") == "user_input"


def _unit_starts(history: list[Message], start: int) -> list[int]:
    """Indices from ``start`` of assistant messages right after a tool_results message (records skipped):
    where a tool round begins."""
    out: list[int] = []
    prev: Message | None = None
    for i, m in enumerate(history):
        if is_record(m):
            continue
        if i >= start and m.role == "assistant" and prev is not None and prev.tool_results:
            out.append(i)
        prev = m
    return out


def current_turn_start(history: list[Message]) -> int | None:
    starts = [i for i, m in enumerate(history) if _turn_start(m)]
    return starts[-1] if starts else None


def cut_point(history: list[Message], budget_tokens: int) -> int | None:
    """Where the summary ends: the oldest turn start after the last record's point whose tail fits half the
    budget; when even the current turn does not, the oldest tool round of the current turn whose tail does
    (a long turn: its rounds are summarized, the newest kept), else the newest candidate. Never between a
    tool_use and its results. None: nothing new to summarize."""
    recs = records_of(history)
    base = _covers(recs[-1]) if recs else 0
    turn = current_turn_start(history)
    inner_from = max(base, turn if turn is not None else 0) + 1
    candidates = [i for i in range(base + 1, len(history)) if _turn_start(history[i])]
    candidates += _unit_starts(history, inner_from)
    candidates = sorted(set(candidates))
    if not candidates:
        return None
    for i in candidates:
        tail = [m for m in history[i:] if not is_record(m)]
        if estimate_tokens(tail) <= budget_tokens // 2:
            return i
    return candidates[-1]


def compaction_id(session_id: str, cut: int) -> str:
    """The idempotent key of one compaction point (a re-run after a crash finds the stored record)."""
    return "cmp-" + hashlib.sha256(f"{session_id}\x1f{cut}".encode()).hexdigest()[:24]


def _render(m: Message, limit: int = ELIDE_KEEP) -> str:
    parts: list[str] = []
    for b in m.content:
        kind = getattr(b, "type", "")
        if isinstance(b, TextBlock):
            parts.append(b.text)
        elif kind == "tool_use":
            args = json.dumps(getattr(b, "input", {}), ensure_ascii=False)
            parts.append(f"[tool call {getattr(b, 'name', '')} {args[:limit]}]")
        elif kind == "tool_result":
            body = str(getattr(b, "content", ""))
            cut = f"\n[... {len(body) - limit} chars elided]" if len(body) > limit else ""
            parts.append(f"[tool result] {body[:limit]}{cut}")
        elif kind == "image":
            parts.append("[a picture]")
    return f"{m.role.upper()}: " + "\n".join(parts)


def summary_request(
    history: list[Message], cut: int, *, model: str, max_tokens: int, budget_tokens: int
) -> ModelRequest:
    """One request: the instructions, the earlier summary (if any) and the transcript of what is dropped (its
    newest part when it is larger than the budget; tool results shortened)."""
    recs = records_of(history)
    base = _covers(recs[-1]) if recs else 0
    lines = [_render(m) for m in history[base:cut] if not is_record(m)]
    lines = [line if len(line) <= TEXT_KEEP else line[:TEXT_KEEP] + " [... cut]" for line in lines]
    room = max(4000, budget_tokens * CHARS_PER_TOKEN)  # the view's budget: it fits where the view fits
    kept: list[str] = []
    size = len(lines[0]) if lines else 0  # the oldest message (where the goal is) is always shown
    for line in reversed(lines[1:]):
        if size + len(line) > room:
            kept.append(f"[... {len(lines) - 1 - len(kept)} messages not shown]")
            break
        kept.append(line)
        size += len(line)
    kept.extend(lines[:1])
    earlier = f"Earlier summary:\n{recs[-1].text.removeprefix(TAG + HEADER).strip()}\n\n" if recs else ""
    text = f"{earlier}Transcript to summarize:\n\n" + "\n\n".join(reversed(kept))
    return ModelRequest(
        model=model,
        system=(SystemSection(name="compaction", text=INSTRUCTIONS),),
        messages=(Message.user_text(text),),
        max_tokens=max_tokens,
        stream=False,
        metadata={"purpose": "compaction"},
    )


def bounded_call(
    provider: Provider, request: ModelRequest, *, timeout_s: float, cancel: threading.Event
) -> ModelResponse:
    """The provider call on its own thread, abandoned after ``timeout_s`` or on cancel (SummaryFailed)."""
    box: dict[str, Any] = {}
    done = threading.Event()

    def target() -> None:
        try:
            box["out"] = provider.complete(request, None)
        except BaseException as exc:
            box["err"] = exc
        finally:
            done.set()

    threading.Thread(target=target, name="compaction-summary", daemon=True).start()
    waited = 0.0
    while not done.wait(0.05):
        waited += 0.05
        if cancel.is_set():
            raise SummaryFailed("cancelled")
        if waited >= timeout_s:
            raise SummaryFailed(f"timed out after {timeout_s:g} s")
    if "err" in box:
        err = box["err"]
        raise SummaryFailed(f"{type(err).__name__}: {err}"[:300])
    out: ModelResponse = box["out"]
    if not out.text.strip():
        raise SummaryFailed("the model answered no summary")
    return out


@dataclass
class Summary:
    """A stored compaction: its record and the model's answer (usage counted by the caller)."""

    record: Message
    response: ModelResponse
    dropped: int


def summarize(
    history: list[Message],
    cut: int,
    *,
    session_id: str,
    turn_id: str,
    provider: Provider,
    model: str,
    max_tokens: int,
    budget_tokens: int,
    timeout_s: float,
    cancel: threading.Event,
    call: Callable[..., ModelResponse] = bounded_call,
) -> Summary:
    """Ask the model for the summary of ``history[..cut]``; the record to append (SummaryFailed if none)."""
    request = summary_request(history, cut, model=model, max_tokens=max_tokens, budget_tokens=budget_tokens)
    response = call(provider, request, timeout_s=timeout_s, cancel=cancel)
    recs = records_of(history)
    dropped = sum(1 for m in history[_covers(recs[-1]) if recs else 0 : cut] if not is_record(m))
    text = f"{TAG}{HEADER}\n{response.text.strip()}"
    turn = current_turn_start(history)
    if turn is not None and turn < cut:  # the current turn's request is summarized: kept verbatim too
        text += f"\n\nThe user's request in the current turn (verbatim):\n{history[turn].text[:REQUEST_KEEP]}"
    record = Message(
        role="user",
        content=(TextBlock(text=text),),
        metadata={
            "origin": ORIGIN,
            "covers": cut,
            "compaction_id": compaction_id(session_id, cut),
            "turn_id": turn_id,
        },
    )
    return Summary(record, response, dropped)
