"""Approvals in a chat: the whole request as the platform's messages, the keyboards a poller has posted (a
short token per approval id: callback data is at most 64 bytes), their chat and message, and the decision a
press maps to."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from geode.protocol import lanes as lanes_msg
from geode.visible_text import visible

PREFIX = "ap"
BUTTONS: tuple[tuple[str, lanes_msg.Decision], ...] = (
    ("Approve", "y"),
    ("Deny", "n"),
    ("Always for this session", "a"),
)
DONE_LABEL = {"y": "Approved", "n": "Denied", "a": "Approved for this session"}


def token_of(approval_id: str) -> str:
    return hashlib.sha256(approval_id.encode()).hexdigest()[:16]


# characters of one approval message per platform, with room for the line an answer adds to the last one
# (Telegram counts UTF-16 units up to 4,096; a Slack section holds 3,000 after escaping; Discord 2,000)
PART_LIMIT = {"telegram": 3_800, "slack": 2_700, "discord": 1_800}
FENCED = ("slack", "discord")  # Markdown platforms: the request goes in a code block, shown as written
MAX_PARTS = 12  # more messages than this is a flood: the request is denied, said why, never shown cut


class TooLong(ValueError):
    """The request does not fit in ``MAX_PARTS`` messages of this platform."""


def _cost(platform: str):  # type: ignore[no-untyped-def]
    """How many units of the platform's limit one character takes."""
    if platform == "slack":
        return lambda ch: {"&": 5, "<": 4, ">": 4}.get(ch, 2 if ord(ch) > 0xFFFF else 1)
    return lambda ch: 2 if ord(ch) > 0xFFFF else 1  # UTF-16 units (Telegram), never fewer than characters


def _cut(text: str, limit: int, cost) -> list[str]:  # type: ignore[no-untyped-def]
    pieces, start, used = [], 0, 0
    for i, ch in enumerate(text):
        w = cost(ch)
        if used + w > limit:
            pieces.append(text[start:i])
            start, used = i, 0
        used += w
    pieces.append(text[start:])
    return pieces


def ask_parts(ask: lanes_msg.ApprovalAsk, platform: str) -> list[str]:
    """The approval as the chat shows it: the whole request (unredacted, control characters escaped), cut
    into as many messages as the platform needs, what "Always" covers and the timeout; the keyboard goes
    with the last. ``TooLong`` when that would take more than ``MAX_PARTS`` messages."""
    head = f"Approve the tool '{visible(ask.tool_name, one_line=True)}' ({ask.safety_level})?"
    covers = "Always is not offered for this tool."
    if ask.always_covers:
        covers = f"Always covers: {ask.always_covers}."
    tail = f"{covers}\nNo answer within {ask.timeout_s:g} s denies it."
    detail = visible(ask.detail)
    fenced = platform in FENCED
    if fenced:  # a fence in the request would end the code block: shown escaped instead
        detail = detail.replace("```", "\\x60\\x60\\x60")
    cost = _cost(platform)
    room = PART_LIMIT.get(platform, 1_800) - sum(map(cost, head + tail)) - 40
    chunks = _cut(detail, room, cost) if detail else []
    if len(chunks) > MAX_PARTS:
        raise TooLong(f"the request is {len(ask.detail)} characters: more than {MAX_PARTS} messages here")
    n = len(chunks)
    parts = []
    for i, chunk in enumerate(chunks, 1):
        body = f"```\n{chunk}\n```" if fenced else chunk
        label = f"[request part {i}/{n}]\n" if n > 1 else ""
        parts.append(f"{head}\n{label}{body}" if i == 1 else f"{label}{body}")
    if not parts:
        return [f"{head}\n{tail}"]
    parts[-1] = f"{parts[-1]}\n{tail}"
    return parts


def parse_data(data: str) -> tuple[str, lanes_msg.Decision] | None:
    """``"ap:<token>:<y|n|a>"`` → (token, decision); None for anything else."""
    prefix, _, rest = data.partition(":")
    token, _, decision = rest.partition(":")
    if prefix != PREFIX or not token or decision not in ("y", "n", "a"):
        return None
    return token, decision  # type: ignore[return-value]


@dataclass
class OpenApproval:
    approval_id: str
    turn_id: str
    channel_key: str
    text: str
    message_id: str = ""


class ApprovalBoard:
    """The approvals waiting in chats (one event loop uses it; no locking)."""

    def __init__(self) -> None:
        self._open: dict[str, OpenApproval] = {}  # token → approval

    def __len__(self) -> int:
        return len(self._open)

    def has(self, approval_id: str) -> bool:
        return token_of(approval_id) in self._open

    def open(
        self, ask: lanes_msg.ApprovalAsk, channel_key: str, text: str
    ) -> tuple[str, list[tuple[str, str]]]:
        """Register an ask (``text``: its message with the keyboard); returns its token and the keyboard's
        (label, callback data) buttons ("Always" only where it is offered)."""
        token = token_of(ask.approval_id)
        self._open[token] = OpenApproval(ask.approval_id, ask.turn_id, channel_key, text)
        offered = [(label, d) for label, d in BUTTONS if d != "a" or ask.always_covers]
        return token, [(label, f"{PREFIX}:{token}:{d}") for label, d in offered]

    def get(self, token: str) -> OpenApproval | None:
        return self._open.get(token)

    def close(self, token: str) -> OpenApproval | None:
        return self._open.pop(token, None)

    def of_turn(self, turn_id: str) -> list[str]:
        return [t for t, a in self._open.items() if a.turn_id == turn_id]
