"""Lanes' store round trips per turn (issue 34): a turn that starts at once is stored once before it is pushed
(its running record, not queued and then running), no read precedes a submit's first write (the store keeps a
done record final and returns it), and a crash or a lost worker between the states is recovered as before."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from geode.lanes.records import MemoryTurnStore
from geode.protocol import lanes as lanes_msg
from geode.protocol import runtime, turns
from geode.protocol.errors import Unavailable
from geode.records.engine import RecordEngine
from geode.records.models import TurnRecord, TurnState
from tests.lanes.harness import done, make, req, submit


class CountingStore(MemoryTurnStore):
    """Records every call lanes makes (``("put", state)`` / ``("get", turn_id)``); ``hold_running`` makes
    running writes wait until ``release`` (a slow fsync) so a test can act while one is in flight."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[str, str]] = []
        self.hold_running = False
        self.holding, self.release = threading.Event(), threading.Event()

    def put_turn(self, turn: TurnRecord) -> TurnRecord:
        self.calls.append(("put", f"{turn.turn_id}:{turn.state.value}"))
        if self.hold_running and turn.state == TurnState.RUNNING and not self.release.is_set():
            self.holding.set()
            self.release.wait(10)
        return super().put_turn(turn)

    def get_turn(self, turn_id: str) -> TurnRecord | None:
        self.calls.append(("get", turn_id))
        return super().get_turn(turn_id)


def test_a_turn_that_starts_at_once_is_stored_once_before_its_push() -> None:
    """One-round turn: 2 store round trips in lanes (running, done), not 4 (get, queued, running, done); a
    turn behind another on its session still goes queued → running → done; the stream says the same."""
    store = CountingStore()
    svc, tr, _ = make(store)
    try:
        svc.worker_ready("loop-1", 1, capacity=2)
        first = submit(svc, "t1", "S")
        assert first.state == "running" and [r["turn_id"] for r in tr.runs()] == ["t1"]
        behind = submit(svc, "t2", "S")
        assert (behind.state, behind.position) == ("queued", 1)
        done(svc, "t1", "S", "loop-1")
        done(svc, "t2", "S", "loop-1")
        assert store.calls == [
            ("put", "t1:running"),
            ("put", "t2:queued"),
            ("put", "t1:done"),
            ("put", "t2:running"),
            ("put", "t2:done"),
        ]
        for turn in ("t1", "t2"):
            kinds = [e["kind"] for e in tr.to("control", lanes_msg.ORIGIN_EVENT) if e["turn_id"] == turn]
            assert kinds == [lanes_msg.TURN_QUEUED, lanes_msg.TURN_STARTED, lanes_msg.TURN_DONE]
        seqs = [e["seq"] for e in tr.to("control", lanes_msg.ORIGIN_EVENT)]
        assert seqs == list(range(seqs[0], seqs[0] + len(seqs)))  # one stream, numbered event by event
        rec = store.get_turn("t1")
        assert rec is not None and rec.state == TurnState.DONE and rec.attempts == 1
    finally:
        svc.stop()


def test_the_queued_and_started_events_of_a_turn_that_starts_at_once_go_in_one_frame() -> None:
    """Both are emitted in the same step (once its running record is stored): one ``origin.events`` frame
    to the origin, not two; a turn that waited gets its queued event when queued, alone, as before."""
    svc, tr, _ = make()
    try:
        svc.worker_ready("loop-1", 1)
        submit(svc, "t1", "S")
        submit(svc, "t2", "S")
        [frame] = tr.to("control", lanes_msg.ORIGIN_EVENTS)
        assert [(e["turn_id"], e["kind"]) for e in frame["events"]] == [
            ("t1", lanes_msg.TURN_QUEUED),
            ("t1", lanes_msg.TURN_STARTED),
        ]
        assert [e["kind"] for e in tr.casts_of("control", lanes_msg.ORIGIN_EVENT)] == [lanes_msg.TURN_QUEUED]
        rep = svc.replay(lanes_msg.Replay(session_id="S", after_seq=0))
        kinds = [lanes_msg.TURN_QUEUED, lanes_msg.TURN_STARTED, lanes_msg.TURN_QUEUED]
        assert [e.kind for e in rep.events] == kinds
    finally:
        svc.stop()


def test_a_turn_id_that_ran_before_is_answered_from_the_put_without_a_read() -> None:
    """A submit retried after its turn ended and left lanes' memory (here: a new lanes incarnation) is told
    ``done``; nothing is pushed again and the stored outcome is untouched."""
    store = CountingStore()
    svc, _tr, _ = make(store)
    svc.worker_ready("loop-1", 1)
    submit(svc, "t1", "S")
    done(svc, "t1", "S", "loop-1")
    svc.stop()
    later, tr2, _ = make(store)
    try:
        later.worker_ready("loop-1", 1)
        store.calls.clear()
        assert submit(later, "t1", "S").state == "done"
        with pytest.raises(Exception, match="another session"):
            submit(later, "t1", "OTHER")
        assert tr2.runs() == [] and later.running() == [] and later.queued() == []
        assert [c[0] for c in store.calls] == ["put", "put"]  # no read: the put returned the done record
        rec = store.get_turn("t1")
        assert rec is not None and rec.state == TurnState.DONE and rec.outcome["text"] == "done t1"  # type: ignore[index]
        submit(later, "t2", "S")  # the worker slot was given back
        assert [r["turn_id"] for r in tr2.runs()] == ["t2"]
    finally:
        later.stop()


class CountedEngine:
    """The real record engine (LMDB) as lanes' TurnStore, with every call lanes makes recorded."""

    def __init__(self, engine: RecordEngine) -> None:
        self.engine = engine
        self.calls: list[str] = []

    def put_turn(self, turn: TurnRecord) -> TurnRecord:
        self.calls.append(f"put {turn.state.value}")
        return self.engine.put_turn(turn)

    def get_turn(self, turn_id: str) -> TurnRecord | None:
        self.calls.append("get")
        return self.engine.get_turn(turn_id)

    def list_turns(self, *, state: str | None = None, session_id: str | None = None) -> list[TurnRecord]:
        return self.engine.list_turns(state=state, session_id=session_id)


def test_the_record_store_returns_the_done_record_to_a_put_over_it(tmp_path: Path) -> None:
    """The same over the real store (LMDB): a done record is final, so the put that would re-admit a turn id
    that ran before changes nothing and tells lanes it is done."""
    engine = RecordEngine(tmp_path / "records", tmp_path / "evidence").open()
    try:
        store = CountedEngine(engine)
        svc, _tr, _ = make(store)  # type: ignore[arg-type]
        svc.worker_ready("loop-1", 1)
        assert submit(svc, "t1", "S").state == "running"
        done(svc, "t1", "S", "loop-1")
        svc.stop()
        assert store.calls == ["put running", "put done"]
        later, tr2, _ = make(store)  # type: ignore[arg-type]
        try:
            later.worker_ready("loop-1", 1)
            assert submit(later, "t1", "S").state == "done"
            assert tr2.runs() == [] and store.calls[2:] == ["put running"]
            rec = engine.get_turn("t1")
            assert rec is not None and rec.state == TurnState.DONE and rec.outcome["text"] == "done t1"  # type: ignore[index]
        finally:
            later.stop()
    finally:
        engine.close()


def test_a_failed_first_write_of_a_turn_that_would_start_at_once_refuses_it_and_frees_its_worker() -> None:
    store = CountingStore()
    svc, tr, _ = make(store)
    try:
        svc.worker_ready("loop-1", 1)
        store.fail = True
        with pytest.raises(Unavailable):
            submit(svc, "t1", "S")
        assert tr.runs() == [] and svc.running() == [] and svc.queued() == []
        store.fail = False
        assert submit(svc, "t2", "S").state == "running"
        assert [r["turn_id"] for r in tr.runs()] == ["t2"]
    finally:
        svc.stop()


def test_a_worker_lost_while_the_first_record_is_stored_runs_the_turn_once_elsewhere() -> None:
    """The running record (the turn's first) is in flight when its worker dies: the turn waits at the head of
    its lane for that write, the submit is answered once it is durable, and it runs once, on the other worker,
    with ``resume`` (as a turn whose worker died right after its running record was stored)."""
    store = CountingStore()
    svc, tr, _ = make(store)
    answers: dict[str, Any] = {}
    try:
        svc.worker_ready("loop-1", 1)
        store.hold_running = True
        body = lanes_msg.Submit(turn_id="t1", session_id="S", origin="control", input={"text": "t1"})
        th = threading.Thread(
            target=lambda: answers.setdefault("t1", svc.lanes.handle(req(lanes_msg.SUBMIT, body)))
        )
        th.start()
        assert store.holding.wait(5), "the running record's write never started"
        first = store.calls[-1][1]
        assert first == "t1:running"
        svc.lanes.handle(req(runtime.CHILD_DIED, runtime.ChildDied(name="loop-1", incarnation=1)))
        ready = turns.WorkerReady(worker="loop-2", incarnation=1, capacity=1)
        svc.lanes.handle(req(turns.WORKER_READY, ready))  # no settle: the first write is still in flight
        assert tr.runs() == [] and "t1" not in answers  # held until its first record is durable
        store.release.set()
        th.join(5)
        svc.lanes.settle()
        assert answers["t1"].state == "queued"
        assert [(r["turn_id"], r["_worker"], r["resume"]) for r in tr.runs()] == [("t1", "loop-2", True)]
        done(svc, "t1", "S", "loop-2")
        rec = store.get_turn("t1")
        assert rec is not None and rec.state == TurnState.DONE and rec.requeues == 1
    finally:
        store.release.set()
        svc.stop()
