"""A turn put's reply is made from the record's stored dump (issue 34, session 6): no ``TurnReply`` model
built in the store to be dumped again, and the same reply the bus sent before (``exclude_none``)."""

from __future__ import annotations

from pathlib import Path

import pytest

import geode.records.service as service
from geode.home import GeodeHome
from geode.protocol import store as m
from geode.protocol.later import Later
from geode.protocol.transport import LocalTransport
from geode.records.engine import RecordEngine
from geode.records.models import TurnRecord, TurnState
from geode.records.search_feed import SearchFeed
from geode.records.service import StoreService
from geode.records.store_client import StoreClient
from tests.records.harness import local_store


def _reply_kinds(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The type of each value a turn put's ``Later`` completed with in the store's service ("dict": a body
    map made in the write; "TurnReply": a model the bus dumps again)."""
    kinds: list[str] = []
    real = service.StoreService._put_turn

    def put_turn(self: service.StoreService, b: m.PutTurn, r: object) -> Later:
        def seen(value: object) -> object:
            kinds.append(type(value).__name__)
            return value

        return real(self, b, r).map(seen)  # type: ignore[arg-type]

    monkeypatch.setattr(service.StoreService, "_put_turn", put_turn)
    return kinds


def test_a_turn_put_replies_from_its_stored_dump(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    built = _reply_kinds(monkeypatch)
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
        assert built == ["dict", "dict"]  # body maps, no reply model to dump
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


def test_a_done_put_with_the_search_feed_replies_from_its_stored_dump_and_is_indexed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the search index on (the store child's case) a done turn's put tells the feed the stored record
    after its commit and replies with the body map made in the write: no ``TurnReply`` built and dumped
    again (one a done put before, session 8); the reply is what the store holds."""
    kinds = _reply_kinds(monkeypatch)
    home = GeodeHome(tmp_path / "home").ensure()
    engine = RecordEngine.for_home(home).open()
    feed = SearchFeed.for_engine(engine, home.root).start()
    told: list[TurnRecord] = []
    real = feed.turn_stored

    def turn_stored(turn: TurnRecord) -> None:
        told.append(turn)
        real(turn)

    monkeypatch.setattr(feed, "turn_stored", turn_stored)
    client = StoreClient(LocalTransport({"store": StoreService(engine, search=feed)}, sender="test#1"))
    try:
        running = client.put_turn(
            TurnRecord(turn_id="t1", session_id="s1", input={"text": "the kestrel"}, state=TurnState.RUNNING)
        )
        assert told == []  # a running turn is not indexed
        outcome = {"text": "it hovers", "x": None}
        reply = client.put_turn(running.model_copy(update={"state": TurnState.DONE, "outcome": outcome}))
        assert reply == engine.get_turn("t1") and reply.outcome == outcome
        assert [t.turn_id for t in told] == ["t1"] and told[0].model_dump() == reply.model_dump()
        assert kinds == ["dict", "dict"]  # ["dict", "TurnReply"] before
        assert feed.flush() and feed.stats.indexed >= 1
        assert client.put_turn(running).state == TurnState.DONE  # never regresses
        assert len(told) == 1  # a running put is not told, even when it finds the turn done
        assert kinds == ["dict", "dict", "dict"]
    finally:
        feed.stop()
        engine.close()
