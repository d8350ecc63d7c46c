"""The group writer's own work per durable write (issue 34, session 4), counted, never timed.

A tool call's rows sent together (``store.timeline.append_many``) are one writer operation, not one per
row, and still refuse a row alone; a commit of the writer runs no context-manager frames and raises no
exception to find its queue empty.
"""

from __future__ import annotations

import sys
import threading
from collections import Counter
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from geode.records.lmdb_env import RecordEnv
from geode.records.models import TimelineEvent
from geode.records.writer import GroupWriter
from tests.records.harness import (
    LocalStore,
    lone_store,  # noqa: F401 (the module's store fixture)
)


def _row(event_id: str, n: int) -> TimelineEvent:
    payload = {"tool_name": "glob_files", "n": n, "summary": "src/a.py\nsrc/b.py"}
    return TimelineEvent(session_id="s-ops", event_id=event_id, kind="tool.called", ts=1.0, payload=payload)


def test_rows_sent_together_are_one_writer_operation_and_a_refused_row_stays_alone(store: LocalStore) -> None:
    writer = store.engine.writer.stats
    assert store.client.append_timelines([_row("e1", 1)]) == []
    ops, batches = writer.ops, writer.batches
    rows = [_row("e2", 2), _row("e1", 99), _row("e3", 3)]  # e1 again, with other content
    errors = store.client.append_timelines(rows)
    print(f"writer ops for a 3-row request: {writer.ops - ops}, commits {writer.batches - batches}")
    assert writer.ops - ops == 1  # was 3: one op (a Later, a queue hand-off, a callback) per row
    assert writer.batches - batches == 1
    assert len(errors) == 1 and errors[0].startswith("e1: Conflict: "), errors
    stored = [(r.seq, r.event.event_id, r.event.payload["n"]) for r in store.client.read_timeline("s-ops")]
    assert stored == [(1, "e1", 1), (2, "e2", 2), (3, "e3", 3)]
    assert writer.failed_ops == 0  # the refused row was the request's answer, not a failed operation


def test_rows_sent_again_are_found_not_written_twice(store: LocalStore) -> None:
    rows = [_row("a", 1), _row("b", 2)]
    assert store.client.append_timelines(rows) == []
    assert store.client.append_timelines(rows) == []  # the sender's retry: idempotent by event id
    assert [r.event.event_id for r in store.client.read_timeline("s-ops")] == ["a", "b"]


def test_rows_of_one_request_look_the_session_s_last_seq_up_once(
    store: LocalStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Seqs stay consecutive per session across a request's rows (two sessions interleaved, a refused row,
    a row sent again) while each session's last seq is read from the table once, not once a row."""
    timeline = store.engine.timeline
    looked: list[str] = []
    real = timeline._last_seq

    def counted(txn: Any, sid: str, pfx: bytes) -> int:
        looked.append(sid)
        return real(txn, sid, pfx)

    monkeypatch.setattr(timeline, "_last_seq", counted)
    assert store.client.append_timelines([_row("e1", 1), _row("e2", 2)]) == []
    other = [r.model_copy(update={"session_id": "s-two"}) for r in (_row("o1", 1), _row("o2", 2))]
    rows = [_row("e3", 3), other[0], _row("e1", 99), _row("e2", 2), other[1], _row("e4", 4)]
    errors = store.client.append_timelines(rows)
    assert len(errors) == 1 and errors[0].startswith("e1: Conflict: "), errors
    assert looked == ["s-ops", "s-ops", "s-two"]  # once a session a request (a new row each before: 2 + 4)
    stored = [(r.seq, r.event.event_id) for r in store.client.read_timeline("s-ops")]
    assert stored == [(1, "e1"), (2, "e2"), (3, "e3"), (4, "e4")]
    assert [(r.seq, r.event.event_id) for r in store.client.read_timeline("s-two")] == [(1, "o1"), (2, "o2")]
    assert store.client.append_timelines([_row("e5", 5)]) == []  # the next request reads the table again
    assert store.client.read_timeline("s-ops")[-1].seq == 5 and looked[-1] == "s-ops"


def _put(db: Any, k: bytes, txn: Any) -> bool:
    return bool(txn.put(k, b"x" * 100, db=db))


class _Calls:
    """What the writer thread runs while ``on`` is set: Python calls by file, exceptions raised in C."""

    def __init__(self) -> None:
        self.on = threading.Event()
        self.files: Counter[str] = Counter()
        self.raised: Counter[str] = Counter()

    def __call__(self, frame: Any, event: str, arg: Any) -> None:
        if not self.on.is_set():
            return
        if event == "call":
            self.files[Path(frame.f_code.co_filename).name] += 1
        elif event == "c_exception":
            self.raised[getattr(arg, "__qualname__", repr(arg))] += 1


def test_a_commit_runs_no_context_manager_and_raises_nothing(tmp_path: Path) -> None:
    renv = RecordEnv(tmp_path / "records").open()
    calls = _Calls()
    threading.setprofile(calls)  # the writer thread started next is profiled, nothing else
    try:
        writer = GroupWriter(renv).start()
    finally:
        threading.setprofile(None)  # type: ignore[arg-type]
    try:
        db = renv.db("timeline")
        writer.run(lambda txn: txn.put(b"warm", b"x", db=db))
        calls.on.set()
        n = 20
        for i in range(n):
            writer.run(partial(_put, db, b"k%03d" % i))
        calls.on.clear()
        assert writer.stats.batches >= n  # one op at a time: every write its own commit
        print(f"writer thread per {n} commits: calls {dict(calls.files)}, raised in C {dict(calls.raised)}")
        assert calls.files["contextlib.py"] == 0  # was 8 a commit: write_scope's and the lock's generators
        assert calls.files["threading.py"] == 0  # was 6 a commit: the shared lock's Condition in Python
        assert sum(calls.raised.values()) == 0  # was 3 a commit: queue.Empty, 2 generators' StopIteration
    finally:
        writer.stop()
        renv.close()
        assert sys.getprofile() is None
