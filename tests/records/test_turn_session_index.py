"""A session's turns are found through a session index: a replay after a lanes restart reads that session's
turns, not every turn the store ever ran (late in a 600 s chaos run that was 5,000 records per probe). A store
written before the index existed is indexed when it opens; pruning a session drops its index entries."""

from __future__ import annotations

import lmdb

from geode.home import GeodeHome
from geode.records.engine import RecordEngine
from geode.records.lmdb_env import key
from geode.records.models import CheckpointSave, TurnRecord, TurnState
from geode.records.settings import StoreConfig
from geode.records.turns import SESSION_INDEX


def _turn(tid: str, sid: str, state: TurnState = TurnState.DONE) -> TurnRecord:
    return TurnRecord(turn_id=tid, session_id=sid, input={"text": tid}, state=state)


def test_a_sessions_turns_in_any_state_oldest_first(home: GeodeHome) -> None:
    with RecordEngine.for_home(home) as e:
        for i in range(30):
            e.put_turn(_turn(f"t-{i:02}", f"s-{i % 3}"))
        e.put_turn(_turn("t-q", "s-1", TurnState.QUEUED))
        assert [t.turn_id for t in e.list_turns(session_id="s-1")] == [
            *(f"t-{i:02}" for i in range(1, 30, 3)),
            "t-q",
        ]
        assert [t.turn_id for t in e.list_turns(state="queued", session_id="s-1")] == ["t-q"]
        assert "t-q" not in [t.turn_id for t in e.list_turns(state="done", session_id="s-1")]
        assert e.list_turns(state="done", session_id="s-none") == []
        assert e.list_turns(session_id="") == []


def test_a_session_listing_never_reads_the_other_sessions_turns(home: GeodeHome) -> None:
    with RecordEngine.for_home(home) as e:
        for i in range(200):
            e.put_turn(_turn(f"t-{i:03}", "busy"))
        e.put_turn(_turn("mine", "s-mine"))
        with e.renv.write_scope() as env, env.begin(write=True) as txn:  # a record nobody can decode
            txn.put(key("t-000"), b"\xc1", db=e.renv.db("turns"))
        assert [t.turn_id for t in e.list_turns(state="done", session_id="s-mine")] == ["mine"]


def test_a_store_from_before_the_index_is_indexed_when_it_opens(home: GeodeHome) -> None:
    with RecordEngine.for_home(home) as e:
        for i in range(20):
            e.put_turn(_turn(f"t-{i:02}", f"s-{i % 2}"))
    env = lmdb.open(str(home.records_dir), max_dbs=32, subdir=True)
    with env.begin(write=True) as txn:  # what an older version left: turns, no session index, no marker
        env.open_db(b"turn_session", txn=txn, create=True)
        txn.drop(env.open_db(b"turn_session", txn=txn), delete=False)
        txn.delete(SESSION_INDEX, db=env.open_db(b"meta", txn=txn))
    env.close()
    with RecordEngine.for_home(home) as e:
        assert [t.turn_id for t in e.list_turns(session_id="s-1")] == [f"t-{i:02}" for i in range(1, 20, 2)]
        assert e.turns.ensure_session_index() == 0  # once only


def test_pruning_a_session_drops_its_turns_and_their_index(home: GeodeHome) -> None:
    cfg = StoreConfig(session_retention_days=0)
    with RecordEngine(home.records_dir, home.evidence_dir, cfg) as e:
        e.save_checkpoint(CheckpointSave(session_id="old", seq=1, base_count=0, status="completed"))
        e.put_turn(_turn("t-old", "old"))
        e.put_turn(_turn("t-keep", "keep"))
        assert e.prune()["sessions"] == 1
        assert e.list_turns(session_id="old") == [] and e.get_turn("t-old") is None
        with e.renv.read() as txn:
            left = [k for k, _ in txn.cursor(db=e.renv.db("turn_session"))]
        assert left == [key("keep", "t-keep")]
