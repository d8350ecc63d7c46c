"""A turn put's reply is made from the record's stored dump (issue 34, session 6): no ``TurnReply`` model
built in the store to be dumped again, and the same reply the bus sent before (``exclude_none``)."""

from __future__ import annotations

from pathlib import Path

import pytest

import geode.records.service as service
from geode.home import GeodeHome
from geode.protocol import store as m
from geode.records.models import TurnRecord, TurnState
from tests.records.harness import local_store


def test_a_turn_put_replies_from_its_stored_dump(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    built: list[int] = []
    real = service._turn_reply

    def counted(turn: TurnRecord) -> m.TurnReply:
        built.append(1)
        return real(turn)

    monkeypatch.setattr(service, "_turn_reply", counted)  # the reply model the store built for each put
    store = local_store(GeodeHome(tmp_path / "home").ensure())
    try:
        queued = TurnRecord(
            turn_id="t1",
            session_id="s1",
            input={"text": "hi", "note": None},
            settings={"model": "m", "allowed_tools": None, "visible_tools": ["a", "b"]},
        )
        first = store.client.put_turn(queued)
        running = store.client.put_turn(
            first.model_copy(update={"state": TurnState.RUNNING, "worker": "loop-1", "incarnation": 2})
        )
        stored = store.engine.get_turn("t1")
        assert stored is not None and running == stored  # what the store holds, None values kept inside
        assert running.settings["allowed_tools"] is None and running.trace is None
        assert running.created_at == first.created_at and running.worker == "loop-1"
        assert built == []  # 1 a put before
        done = running.model_copy(update={"state": TurnState.DONE, "outcome": {"text": "ok", "error": None}})
        assert store.client.put_turn(done).state == TurnState.DONE
        again = store.client.put_turn(running)  # a done turn never regresses: the done record comes back
        assert again.state == TurnState.DONE and again.outcome == {"text": "ok", "error": None}
    finally:
        store.close()


def test_a_handler_put_copies_no_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The record is dumped from the received turn with its two times set (what a copy of it updated with
    them dumps to), no ``model_copy`` made only to be dumped (issue 34, session 7); the in-process put still
    returns the stored record as a model."""
    copies: list[int] = []
    real = TurnRecord.model_copy

    def counted(self: TurnRecord, *args: object, **kwargs: object) -> TurnRecord:
        copies.append(1)
        return real(self, *args, **kwargs)  # type: ignore[arg-type]

    store = local_store(GeodeHome(tmp_path / "home").ensure())
    try:
        queued = TurnRecord(turn_id="t1", session_id="s1", input={"text": "hi"}, created_at=5.0)
        monkeypatch.setattr(TurnRecord, "model_copy", counted)
        first = store.client.put_turn(queued)
        running = TurnRecord.model_validate(
            {**first.model_dump(), "state": "running", "worker": "loop-1", "incarnation": 2}
        )
        second = store.client.put_turn(running)
        assert copies == []  # 2 before (one a put)
        stored = store.engine.get_turn("t1")
        assert stored is not None and second == stored and first.created_at == second.created_at == 5.0
        assert stored.updated_at >= first.updated_at > 0 and stored.state == TurnState.RUNNING
        direct = store.engine.turns.put(stored.model_copy(update={"state": TurnState.DONE}))
        assert direct == store.engine.get_turn("t1") and direct.created_at == 5.0
    finally:
        store.close()
