"""A turn's put reads the stored record it replaces (its state and created_at) from the store's memory of
the record it wrote last, not by unpacking it (issue 34: ~10 us a put, 2 puts a turn); bytes it did not
write (another writer's, a rolled-back write's) are unpacked as before."""

from __future__ import annotations

from typing import Any

import pytest

import geode.records.turns as turns
from geode.records.lmdb_env import key, pack, unpack
from geode.records.models import TurnRecord, TurnState
from tests.records.harness import (
    LocalStore,
    lone_store,  # noqa: F401 (the module's store fixture)
)


def _counting(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []

    def counted(b: bytes) -> Any:
        calls.append(1)
        return unpack(b)

    monkeypatch.setattr(turns, "unpack", counted)
    return calls


def test_a_turns_puts_unpack_nothing_it_wrote_and_keep_created_at(
    store: LocalStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    ts = store.engine.turns
    unpacked = _counting(monkeypatch)
    queued = TurnRecord(turn_id="t1", session_id="s1", input={"text": "hi"}, created_at=12.5)
    first = ts.put(queued)
    running = ts.put(queued.model_copy(update={"state": TurnState.RUNNING, "worker": "loop-1"}))
    done = ts.put(queued.model_copy(update={"state": TurnState.DONE, "outcome": {"ok": True}}))
    assert unpacked == []
    assert first.created_at == running.created_at == done.created_at == 12.5
    again = ts.put(queued)  # a done turn is not regressed: the stored record, unpacked and validated
    assert again.state == TurnState.DONE and unpacked == [1]
    assert [t.turn_id for t in ts.list(state="done")] == ["t1"] and ts.list(state="queued") == []


def test_bytes_the_store_did_not_write_are_unpacked(
    store: LocalStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    ts = store.engine.turns
    renv = store.engine.renv
    ts.put(TurnRecord(turn_id="t1", session_id="s1", created_at=1.0))
    other = TurnRecord(turn_id="t1", session_id="s1", state=TurnState.RUNNING, created_at=7.0)
    ts.writer.run(lambda txn: txn.put(key("t1"), pack(other.model_dump(mode="json")), db=renv.db("turns")))
    unpacked = _counting(monkeypatch)
    stored = ts.put(other.model_copy(update={"state": TurnState.DONE, "created_at": 0.0}))
    assert unpacked == [1] and stored.created_at == 7.0
    assert len(ts._last) == 0  # a done turn is not remembered
    for i in range(turns.MEMO_CAP + 5):
        ts.put(TurnRecord(turn_id=f"q{i}", session_id="s1"))
    assert len(ts._last) == turns.MEMO_CAP
