"""The store's own work per turn put (issue 34, session 5), counted, never timed.

A turn put reads the stored record's state and ``created_at`` instead of validating the whole record again
(the record is the store's own dump; a done one is still validated, to be returned), and a put that needs no
search indexing makes its reply in the write: one ``Later`` (the writer's) fewer per put. What a user sees
stays: a done turn never regresses, ``created_at`` is kept, the state index follows the turn.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from geode.protocol.later import Later
from geode.records.models import TurnRecord, TurnState
from tests.records.harness import (
    LocalStore,
    lone_store,  # noqa: F401 (the module's store fixture)
)


@pytest.fixture
def turn_validations(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """One entry per ``TurnRecord.model_validate`` on ``TurnRecord`` itself (a ``PutTurn`` request's own
    validation, a subclass, is not counted)."""
    calls: list[int] = []
    orig: Callable[..., Any] = TurnRecord.model_validate.__func__  # type: ignore[attr-defined]

    def spy(cls: type[TurnRecord], obj: Any, *args: Any, **kwargs: Any) -> Any:
        if cls is TurnRecord:
            calls.append(1)
        return orig(cls, obj, *args, **kwargs)

    monkeypatch.setattr(TurnRecord, "model_validate", classmethod(spy))
    return calls


@pytest.fixture
def laters(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """One entry per ``Later`` made."""
    made: list[int] = []
    orig = Later.__init__

    def init(self: Later) -> None:
        made.append(1)
        orig(self)

    monkeypatch.setattr(Later, "__init__", init)
    return made


def _turn(state: TurnState, **extra: Any) -> TurnRecord:
    return TurnRecord(turn_id="t-put", session_id="s-put", state=state, input={"text": "hi"}, **extra)


def test_a_turn_put_validates_no_stored_record_and_replies_from_the_write(
    store: LocalStore, turn_validations: list[int], laters: list[int]
) -> None:
    first = store.client.put_turn(_turn(TurnState.QUEUED, created_at=0.0))
    assert first.created_at > 0
    turn_validations.clear()
    laters.clear()
    running = store.client.put_turn(_turn(TurnState.RUNNING, worker="loop-1", incarnation=2))
    print(f"per put over a stored record: {len(turn_validations)} validations, {len(laters)} Laters")
    assert turn_validations == []  # was 1: the stored record validated to read its state and created_at
    # was 3: the writer's, the reply's, and one to map the record to the reply; the reply's is a view of the
    # writer's since session 11 (geode.protocol.later.Settled: no lock, no Later.__init__)
    assert len(laters) == 1
    assert running.state == TurnState.RUNNING and running.worker == "loop-1"
    assert running.created_at == first.created_at  # kept from the stored record
    assert [t.turn_id for t in store.client.list_turns(state="running")] == ["t-put"]
    assert store.client.list_turns(state="queued") == []  # the index entry moved with the state


def test_a_done_turn_never_regresses_and_is_returned_as_stored(
    store: LocalStore, turn_validations: list[int]
) -> None:
    store.client.put_turn(_turn(TurnState.QUEUED))
    done = store.client.put_turn(_turn(TurnState.DONE, outcome={"status": "ok", "error": None}))
    turn_validations.clear()
    again = store.client.put_turn(_turn(TurnState.RUNNING, worker="loop-2"))
    assert again.state == TurnState.DONE and again.outcome == done.outcome and again.worker is None
    assert turn_validations == [1]  # the done record, validated to be returned
    assert store.client.get_turn("t-put") == done
    assert [t.turn_id for t in store.client.list_turns(state="done")] == ["t-put"]
    assert store.client.list_turns(state="running") == []
