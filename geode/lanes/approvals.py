"""Approvals relayed to a turn's origin: one waiter per approval id, denied on timeout or disconnect."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from geode.protocol.lanes import ApprovalDecision

MAX_PENDING = 1024


@dataclass
class _Pending:
    approval_id: str
    session_id: str
    turn_id: str
    origin: str
    done: threading.Event = field(default_factory=threading.Event)
    decision: str = "n"
    reason: str = "timeout"
    note: str = ""  # the person's reason with a denial, passed on to the model


class ApprovalDesk:
    """Blocks the asking thread until the origin answers, the deadline passes, or the origin goes away."""

    def __init__(self, max_pending: int = MAX_PENDING) -> None:
        self._lock = threading.Lock()
        self._pending: dict[str, _Pending] = {}
        self._max = max_pending

    def open(self, approval_id: str, *, session_id: str, turn_id: str, origin: str) -> bool:
        """Register a pending approval. False when the id is already pending or the desk is full."""
        with self._lock:
            if approval_id in self._pending or len(self._pending) >= self._max:
                return False
            self._pending[approval_id] = _Pending(approval_id, session_id, turn_id, origin)
            return True

    def wait(self, approval_id: str, timeout_s: float) -> ApprovalDecision:
        with self._lock:
            p = self._pending.get(approval_id)
        if p is None:
            return ApprovalDecision(approval_id=approval_id, decision="n", reason="unknown")
        p.done.wait(timeout_s)
        with self._lock:
            self._pending.pop(approval_id, None)
        return ApprovalDecision(
            approval_id=approval_id,
            decision=p.decision,
            reason=p.reason,
            note=p.note,  # type: ignore[arg-type]
        )

    def answer(
        self, approval_id: str, decision: str, reason: str = "user", *, origin: str = "", note: str = ""
    ) -> bool:
        """Resolve one approval; False for a stale id (nothing pending: ignored, never applied later) and for
        an answer from a peer other than the turn's origin (``origin``: the answering peer's name)."""
        with self._lock:
            p = self._pending.get(approval_id)
            if p is None or p.done.is_set():
                return False
            if origin and origin != p.origin:
                return False
            p.decision, p.reason, p.note = decision, reason, note
            p.done.set()
            return True

    def deny_where(self, *, origin: str | None = None, turn_id: str | None = None, reason: str) -> int:
        """Deny every pending approval of an origin (it disconnected or died) or of a turn (cancelled)."""
        with self._lock:
            hits = [
                p
                for p in self._pending.values()
                if not p.done.is_set()
                and (origin is None or p.origin == origin)
                and (turn_id is None or p.turn_id == turn_id)
            ]
            for p in hits:
                p.decision, p.reason = "n", reason
                p.done.set()
            return len(hits)

    def pending(self) -> list[dict[str, str]]:
        with self._lock:
            return [
                {
                    "approval_id": p.approval_id,
                    "session_id": p.session_id,
                    "turn_id": p.turn_id,
                    "origin": p.origin,
                }
                for p in self._pending.values()
                if not p.done.is_set()
            ]
