"""Approval keyboards a poller has posted: a short token per approval id (callback data is at most 64
bytes), the chat and message that carry it, and the decision a press maps to."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from geode.protocol import lanes as lanes_msg

PREFIX = "ap"
BUTTONS: tuple[tuple[str, lanes_msg.Decision], ...] = (
    ("Approve", "y"),
    ("Deny", "n"),
    ("Always for this session", "a"),
)
DONE_LABEL = {"y": "Approved", "n": "Denied", "a": "Approved for this session"}


def token_of(approval_id: str) -> str:
    return hashlib.sha256(approval_id.encode()).hexdigest()[:16]


def ask_text(ask: lanes_msg.ApprovalAsk) -> str:
    lines = [f"Approve the tool '{ask.tool_name}' ({ask.safety_level})?"]
    if ask.detail:
        lines.append(ask.detail[:1000])
    lines.append(f"No answer within {ask.timeout_s:g} s denies it.")
    return "\n".join(lines)


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

    def open(self, ask: lanes_msg.ApprovalAsk, channel_key: str) -> tuple[str, list[tuple[str, str]]]:
        """Register an ask; returns its token and the keyboard's (label, callback data) buttons."""
        token = token_of(ask.approval_id)
        self._open[token] = OpenApproval(ask.approval_id, ask.turn_id, channel_key, ask_text(ask))
        return token, [(label, f"{PREFIX}:{token}:{d}") for label, d in BUTTONS]

    def get(self, token: str) -> OpenApproval | None:
        return self._open.get(token)

    def close(self, token: str) -> OpenApproval | None:
        return self._open.pop(token, None)

    def of_turn(self, turn_id: str) -> list[str]:
        return [t for t, a in self._open.items() if a.turn_id == turn_id]
