"""Approvals relayed to a turn's origin: one pending entry per approval id, denied on timeout or disconnect.

Single-threaded by contract (the lanes actor owns it): nobody blocks on the desk. A decision is handed to
the entry's ``then`` callback (the actor answers the asking request with it); :meth:`expire` times entries
out from the actor's tick. ``wait`` remains for a caller without a callback (it blocks its own thread).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from geode.protocol.lanes import ApprovalDecision

MAX_PENDING = 1024
Then = Callable[[ApprovalDecision], None]


@dataclass
class _Pending:
    approval_id: str
    session_id: str
    turn_id: str
    origin: str
    deadline: float | None = None
    then: Then | None = None
    done: threading.Event = field(default_factory=threading.Event)
    decision: str = "n"
    reason: str = "timeout"
    note: str = ""  # the person's reason with a denial, passed on to the model
    ask: dict[str, Any] = field(default_factory=dict)  # the request as sent to the origin (sent again)

    def decided(self) -> ApprovalDecision:
        return ApprovalDecision(
            approval_id=self.approval_id,
            decision=self.decision,  # type: ignore[arg-type]
            reason=self.reason,
            note=self.note,
        )


class ApprovalDesk:
    """Pending approvals by id; each resolves once: answered, denied (disconnect, cancel) or timed out."""

    def __init__(self, max_pending: int = MAX_PENDING) -> None:
        self._pending: dict[str, _Pending] = {}
        self._max = max_pending

    def open(
        self,
        approval_id: str,
        *,
        session_id: str,
        turn_id: str,
        origin: str,
        deadline: float | None = None,
        then: Then | None = None,
        ask: dict[str, Any] | None = None,
    ) -> bool:
        """Register a pending approval. False when the id is already pending or the desk is full."""
        if approval_id in self._pending or len(self._pending) >= self._max:
            return False
        self._pending[approval_id] = _Pending(
            approval_id, session_id, turn_id, origin, deadline, then, ask=dict(ask or {})
        )
        return True

    def pending_for(self, origin: str) -> list[_Pending]:
        """The approvals still waiting on ``origin`` (to ask again when that peer (re)appears)."""
        return [p for p in self._pending.values() if p.origin == origin and not p.done.is_set()]

    def wait(self, approval_id: str, timeout_s: float) -> ApprovalDecision:
        """Block the calling thread for an entry opened without ``then`` (not for the lanes actor)."""
        p = self._pending.get(approval_id)
        if p is None:
            return ApprovalDecision(approval_id=approval_id, decision="n", reason="unknown")
        p.done.wait(timeout_s)
        self._pending.pop(approval_id, None)
        return p.decided()

    def _resolve(self, p: _Pending, decision: str, reason: str, note: str = "") -> None:
        p.decision, p.reason, p.note = decision, reason, note
        p.done.set()
        if p.then is not None:
            self._pending.pop(p.approval_id, None)
            p.then(p.decided())

    def answer(
        self, approval_id: str, decision: str, reason: str = "user", *, origin: str = "", note: str = ""
    ) -> bool:
        """Resolve one approval; False for a stale id (nothing pending: ignored, never applied later) and for
        an answer from a peer other than the turn's origin (``origin``: the answering peer's name)."""
        p = self._pending.get(approval_id)
        if p is None or p.done.is_set():
            return False
        if origin and origin != p.origin:
            return False
        self._resolve(p, decision, reason, note)
        return True

    def deny_where(self, *, origin: str | None = None, turn_id: str | None = None, reason: str) -> int:
        """Deny every pending approval of an origin (it disconnected or died) or of a turn (cancelled)."""
        hits = [
            p
            for p in list(self._pending.values())
            if not p.done.is_set()
            and (origin is None or p.origin == origin)
            and (turn_id is None or p.turn_id == turn_id)
        ]
        for p in hits:
            self._resolve(p, "n", reason)
        return len(hits)

    def expire(self, now: float) -> int:
        """Deny (``timeout``) every pending approval whose deadline has passed."""
        late = [
            p
            for p in list(self._pending.values())
            if not p.done.is_set() and p.deadline is not None and now >= p.deadline
        ]
        for p in late:
            self._resolve(p, "n", "timeout")
        return len(late)

    def pending(self) -> list[dict[str, str]]:
        return [
            {
                "approval_id": p.approval_id,
                "session_id": p.session_id,
                "turn_id": p.turn_id,
                "origin": p.origin,
            }
            for p in list(self._pending.values())
            if not p.done.is_set()
        ]
