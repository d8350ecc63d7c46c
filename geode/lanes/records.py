"""The slice of the record store lanes needs (durable turn records), how lanes runs its round trips
(a :class:`StoreRunner`: off its thread, answering later), and in-memory / inline versions for tests."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from geode.records.models import TurnRecord, TurnState


class TurnStore(Protocol):
    """``put_turn`` returns the record as stored: a turn's done record is final, so a put over it stores
    nothing and returns the done record (how lanes learns that a submitted turn id ran before)."""

    def put_turn(self, turn: TurnRecord) -> TurnRecord: ...
    def get_turn(self, turn_id: str) -> TurnRecord | None: ...
    def list_turns(self, *, state: str | None = None, session_id: str | None = None) -> list[TurnRecord]: ...


Outcome = Any  # a store call's result, or the exception it raised
Then = Callable[[Outcome], None]


class StoreRunner(Protocol):
    """Runs ``call`` (a blocking round trip to the store) and hands its outcome to ``then`` on the owner's
    thread. Calls with the same ``key`` (a turn id) complete in the order they were run; others need not."""

    def __call__(self, key: str, call: Callable[[], Any], then: Then) -> None: ...


def inline_runner(key: str, call: Callable[[], Any], then: Then) -> None:
    """Run the round trip now, on the caller's thread (single-process tools and synchronous tests)."""
    try:
        out: Outcome = call()
    except Exception as exc:
        out = exc
    then(out)


class MemoryTurnStore:
    """A dict-backed TurnStore (single-process mode and tests); ``fail`` makes every write fail.

    Safe from the runner's threads without a lock: stored records are never mutated (a put replaces the
    entry with a copy), and each dict access below is a single atomic operation."""

    def __init__(self) -> None:
        self._turns: dict[str, TurnRecord] = {}
        self.fail = False
        self.writes = 0

    def put_turn(self, turn: TurnRecord) -> TurnRecord:
        from geode.protocol.errors import Unavailable

        if self.fail:
            raise Unavailable("turn store unavailable")
        old = self._turns.get(turn.turn_id)
        if old is not None and old.state == TurnState.DONE:  # as the store: a done record is final
            return old.model_copy(deep=True)
        self.writes += 1
        self._turns[turn.turn_id] = turn.model_copy(deep=True)
        return turn

    def get_turn(self, turn_id: str) -> TurnRecord | None:
        t = self._turns.get(turn_id)
        return t.model_copy(deep=True) if t else None

    def list_turns(self, *, state: str | None = None, session_id: str | None = None) -> list[TurnRecord]:
        stored = list(self._turns.values())
        out = [
            t.model_copy(deep=True)
            for t in stored
            if (state is None or t.state == state) and (session_id is None or t.session_id == session_id)
        ]
        return sorted(out, key=lambda t: (t.created_at, t.turn_id))


__all__ = ["MemoryTurnStore", "StoreRunner", "TurnRecord", "TurnState", "TurnStore", "inline_runner"]
