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
