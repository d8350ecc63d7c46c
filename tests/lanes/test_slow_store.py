"""One session's slow store write holds up only that session: lanes keeps admitting and starting others."""

from __future__ import annotations

import threading
from typing import Any

from geode.lanes.records import MemoryTurnStore
from geode.protocol import lanes as lanes_msg
from geode.records.models import TurnRecord, TurnState
from tests.lanes.harness import make, req


class SlowStore(MemoryTurnStore):
    """Writes of ``slow_session``'s turns wait until ``release`` is set (an LMDB fsync that takes long)."""

    def __init__(self) -> None:
        super().__init__()
        self.slow_session = ""
        self.holding = threading.Event()
        self.release = threading.Event()

    def put_turn(self, turn: TurnRecord) -> TurnRecord:
        if turn.session_id == self.slow_session and not self.release.is_set():
            self.holding.set()
            self.release.wait(10)
        return super().put_turn(turn)


def _submit(svc: Any, turn: str, session: str, box: dict[str, Any]) -> threading.Thread:
    body = lanes_msg.Submit(turn_id=turn, session_id=session, origin="control", input={"text": turn})
    th = threading.Thread(target=lambda: box.setdefault(turn, svc.lanes.handle(req(lanes_msg.SUBMIT, body))))
    th.start()
    return th


def test_another_sessions_turn_is_submitted_and_started_while_one_write_is_slow() -> None:
    store = SlowStore()
    svc, tr, _ = make(store)
    try:
        svc.worker_ready("loop-1", 1, capacity=2)
        store.slow_session = "A"
        replies: dict[str, Any] = {}
        slow = _submit(svc, "a1", "A", replies)
        assert store.holding.wait(5), "session A's record write never started"

        fast = _submit(svc, "b1", "B", replies)
        fast.join(5)
        assert not fast.is_alive(), "session B's submit waited for session A's store write"
        assert replies["b1"].state == "running"  # started at once: its first record is the running one
        assert tr.wait_for(lambda: [r["turn_id"] for r in tr.runs()] == ["b1"], 5)
        assert store.get_turn("b1").state == TurnState.RUNNING  # type: ignore[union-attr]
        # A is not answered (nor started) before its record is durable
        assert slow.is_alive() and "a1" not in replies and store.get_turn("a1") is None

        store.release.set()
        slow.join(5)
        assert replies["a1"].state == "running"
        assert tr.wait_for(lambda: sorted(r["turn_id"] for r in tr.runs()) == ["a1", "b1"], 5)
    finally:
        store.release.set()
        svc.stop()
