"""A turn's settings, resume flag and re-queue count are typed TurnRecord fields, and a record an older
version stored (``_settings`` / ``_resume`` / ``_requeues`` in its input) still loads from LMDB and runs."""

from __future__ import annotations

from pathlib import Path

from geode.records.engine import RecordEngine
from geode.records.lmdb_env import key, pack
from geode.records.models import TurnRecord, TurnState
from tests.lanes.harness import make, submit

SETTINGS = {"model": "claude-haiku-4-5-20251001", "time_budget_s": 30.0, "denied_tools": ["run_bash"]}


def _store_as_older_version(engine: RecordEngine, rec: TurnRecord, legacy_input: dict[str, object]) -> None:
    """Put ``rec`` (its indexes), then overwrite its stored body with the older shape: ``_``-keys in input."""
    engine.put_turn(rec)
    body = rec.model_dump(mode="json", exclude={"settings", "resume", "requeues"}) | {"input": legacy_input}
    with engine.renv.write_scope() as env, env.begin(write=True) as txn:
        txn.put(key(rec.turn_id), pack(body), db=engine.renv.db("turns"))


def test_settings_resume_and_requeues_are_fields_not_input_keys() -> None:
    svc, tr, store = make()
    try:
        svc.worker_ready("loop-1", 1)
        submit(svc, "t1", "S", settings=SETTINGS)
        rec = store.get_turn("t1")
        assert rec is not None and rec.input == {"text": "t1"}  # the user's input only
        assert rec.settings == SETTINGS and rec.resume is False and rec.requeues == 0
        svc.child_died("loop-1", 1)
        rec = store.get_turn("t1")
        assert rec is not None and (rec.resume, rec.requeues) == (True, 1) and rec.input == {"text": "t1"}
        svc.worker_ready("loop-1", 2)
        run = tr.runs()[-1]
        assert run["settings"] == SETTINGS and run["resume"] is True and run["input"] == {"text": "t1"}
    finally:
        svc.stop()


def test_a_record_stored_by_an_older_version_loads_and_runs(tmp_path: Path) -> None:
    engine = RecordEngine(tmp_path / "records", tmp_path / "evidence").open()
    try:
        queued = TurnRecord(turn_id="t-old", session_id="S", mode="DAEMON", created_at=1.0)
        legacy = {"text": "hi", "chat": 7, "_settings": SETTINGS, "_resume": True, "_requeues": 2}
        _store_as_older_version(engine, queued, legacy)
        rec = engine.get_turn("t-old")
        assert rec is not None and rec.input == {"text": "hi", "chat": 7}
        assert (rec.settings, rec.resume, rec.requeues) == (SETTINGS, True, 2)
        assert [t.turn_id for t in engine.list_turns(state="queued")] == ["t-old"]
        bad = TurnRecord(turn_id="t-bad", session_id="B", created_at=2.0, state=TurnState.DONE)
        _store_as_older_version(engine, bad, {"text": "x", "_requeues": "many", "_settings": None})
        old_bad = engine.get_turn("t-bad")
        assert old_bad is not None and (old_bad.requeues, old_bad.settings) == (0, {})  # read, not refused

        svc, tr, _ = make(engine)  # lanes adopts it at start, as after an upgrade
        try:
            assert svc.queued() == ["t-old"]
            assert svc.status()["turns"][0]["requeues"] == 2
            svc.worker_ready("loop-1", 1)
            [run] = tr.runs()
            assert run["settings"] == SETTINGS and run["resume"] is True and run["mode"] == "DAEMON"
            assert run["input"] == {"text": "hi", "chat": 7}  # no `_`-key reaches the worker
            svc.child_died("loop-1", 1)  # one more loss counts on from the migrated count
            again = engine.get_turn("t-old")
            assert again is not None and again.requeues == 3 and "_requeues" not in again.input
        finally:
            svc.stop()
    finally:
        engine.close()
