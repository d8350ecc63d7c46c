"""The work a durable write costs the store and its client (issue 34), counted, never timed.

A tool call's timeline rows run no secret-shape regex unless a text may hold a secret; a checkpoint save
builds its fingerprint and state record without the canonical-JSON walk and validates the stored state once
per session (not once per save). What is stored stays what the previous version stored (fingerprints,
the state record's layout).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import geode.redaction as redaction
from geode.records.lmdb_env import key, unpack
from geode.records.models import (
    CheckpointSave,
    CheckpointState,
    PendingBatch,
    PendingOperation,
    TimelineEvent,
)
from geode.records.save_digest import packed_save
from tests.records.harness import (
    LocalStore,
    lone_store,  # noqa: F401 (the module's store fixture)
)


class _CountingPattern:
    """A compiled pattern that counts its scans (``sub``), for every shape of the redaction list."""

    def __init__(self, pattern: re.Pattern[str], scans: list[str], label: str) -> None:
        self._pattern = pattern
        self._scans = scans
        self._label = label

    def sub(self, *args: Any, **kw: Any) -> str:
        self._scans.append(self._label)
        return self._pattern.sub(*args, **kw)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._pattern, name)


@pytest.fixture
def scans() -> Iterator[list[str]]:
    out: list[str] = []
    shapes = {id(s): (s, s.pattern) for s in (*redaction.SHAPES, *redaction._LOG_SHAPES)}
    for shape, pattern in shapes.values():  # the shapes are frozen dataclasses
        object.__setattr__(shape, "pattern", _CountingPattern(pattern, out, shape.label))
    try:
        yield out
    finally:
        for shape, pattern in shapes.values():
            object.__setattr__(shape, "pattern", pattern)


FILES = "\n".join(f"src/pkg/module_{i}.py" for i in range(40))[:500]


def _tool_rows(i: int) -> list[TimelineEvent]:
    base = {
        "tool_name": "glob_files",
        "tool_use_id": f"toolu_{i:020d}",
        "operation_id": f"op-{i:032x}",
        "turn_id": "turn-abc",
        "step_id": f"s{i}",
        "mode": "IPC",
        "arguments": {"pattern": "**/*.py", "path": "."},
    }
    done = {**base, "status": "ok", "error_type": None, "executed": True, "summary": FILES}
    return [
        TimelineEvent(session_id="s1", event_id=f"op{i}:called", kind="tool.called", ts=1.0, payload=base),
        TimelineEvent(session_id="s1", event_id=f"op{i}:done", kind="tool.completed", ts=2.0, payload=done),
    ]


def test_a_tool_calls_timeline_rows_run_no_secret_regex(store: LocalStore, scans: list[str]) -> None:
    for i in range(3):
        for row in _tool_rows(i):
            store.client.append_timeline(row)
    assert scans == [], f"{len(scans)} secret-shape scans for rows holding no secret: {sorted(set(scans))}"
    rows = store.client.read_timeline("s1")
    assert len(rows) == 6 and rows[-1].event.payload["summary"] == FILES
    # a text that may hold a secret still goes through the shapes, and is masked
    leak = TimelineEvent(
        session_id="s1",
        event_id="leak",
        kind="tool.completed",
        ts=3.0,
        payload={"summary": "curl -H 'Authorization: Bearer abcdefgh12345678' https://x"},
    )
    store.client.append_timeline(leak)
    assert "bearer-token" in scans
    stored = store.client.read_timeline("s1")[-1].event.payload["summary"]
    assert "abcdefgh12345678" not in stored and "Bearer [REDACTED]" in stored


def _save(seq: int, base: int, *, pending: bool) -> CheckpointSave:
    batch = PendingBatch(
        turn_id="t1",
        step_id=f"s{seq}",
        operations=(PendingOperation(tool_use_id=f"tu{seq}", operation_id=f"op{seq}", name="glob_files"),),
    )
    return CheckpointSave(
        session_id="s1",
        seq=seq,
        base_count=base,
        new_messages=[
            {"role": "assistant", "content": [{"type": "text", "text": f"round {seq}"}], "metadata": {}},
            {"role": "user", "content": [{"type": "text", "text": FILES}], "metadata": {}},
        ],
        cognitive_state={"goal": "find", "observations": [f"seen {j} " * 30 for j in range(32)]},
        guard_counters={"turn_id": "t1", "round_index": seq, "elapsed_s": 0.25 * seq},
        pending_batch=batch if pending else None,
        meta={"mode": "IPC", "title": "ünïcode title", "turn_id": "t1", f"k{seq}": seq},
    )


def test_checkpoint_saves_walk_nothing_and_validate_the_state_once(
    store: LocalStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    walks: list[int] = []
    plain = redaction._as_json

    def walked(obj: Any) -> Any:
        walks.append(1)
        return plain(obj)

    monkeypatch.setattr(redaction, "_as_json", walked)
    validated: list[int] = []
    real = getattr(CheckpointState.model_validate, "__func__")  # noqa: B009

    def counted(cls: Any, *a: Any, **kw: Any) -> Any:
        validated.append(1)
        return real(cls, *a, **kw)

    monkeypatch.setattr(CheckpointState, "model_validate", classmethod(counted))
    saves = [_save(seq, 2 * (seq - 1), pending=seq % 2 == 1) for seq in range(1, 11)]
    for s in saves:
        assert store.client.save_checkpoint(s).seq == s.seq
    assert store.client.save_checkpoint(saves[-1]).noop  # a re-sent save is still a no-op
    restored = store.client.load_checkpoint("s1")
    assert restored is not None and len(restored.messages) == 20
    assert walks == [], "the canonical-JSON walk ran on the checkpoint path"
    assert len(validated) <= 1, f"the stored state was validated {len(validated)} times for 10 saves"

    # what is stored: the digest of the save's JSON dump in packed pieces (save_digest) and the state
    # record as CheckpointState(...).model_dump(mode="json") makes it
    renv = store.engine.renv
    with renv.read() as txn:
        fp = txn.get(key("s1", 10), db=renv.db("ck_seqfp"))
        raw = txn.get(key("s1"), db=renv.db("ck_state"))
    assert raw is not None
    record = unpack(raw)
    assert fp is not None and fp == packed_save(saves[-1], False)[3]  # the p1 digest of its JSON dump
    last = saves[-1]
    expected = CheckpointState(
        session_id="s1",
        seq=10,
        message_count=20,
        status=last.status,
        cognitive_state=last.cognitive_state,
        guard_counters=last.guard_counters,
        pending_batch=last.pending_batch,
        model_settings=last.model_settings,
        meta={k: v for s in saves for k, v in s.meta.items()},
        created_at=record["created_at"],
        updated_at=record["updated_at"],
    ).model_dump(mode="json")
    assert list(record) == list(expected) and record == expected
    # the remembered state is the one validating the stored record gives
    assert store.engine.checkpoints.state("s1") == real(CheckpointState, record)


def test_a_full_write_queue_is_overloaded_and_what_was_queued_commits(tmp_path: Any) -> None:
    """The writer's queue is bounded: past ``queue_max`` waiting writes a write is refused at once
    (``overloaded``, retryable), and every write queued before commits."""
    import threading

    from geode.protocol.errors import Overloaded
    from geode.records.lmdb_env import RecordEnv
    from geode.records.writer import GroupWriter

    renv = RecordEnv(tmp_path / "db").open()
    writer = GroupWriter(renv, queue_max=2).start()
    gate = threading.Event()
    try:
        first = writer.submit(lambda txn: gate.wait(10) and 0)  # holds the writer in its batch
        assert _first_taken(writer)

        def put(i: int) -> Callable[[Any], int]:
            return lambda txn: txn.put(f"k{i}".encode(), b"v") and i

        queued = [writer.submit(put(i)) for i in range(2)]
        with pytest.raises(Overloaded):
            writer.submit(lambda txn: 99)
        gate.set()
        assert first.result(10) == 0
        assert [q.result(10) for q in queued] == [0, 1]
    finally:
        gate.set()
        writer.stop()
        renv.close()


def _first_taken(writer: Any) -> bool:
    """True once the writer took the first write off its queue (it is then inside that write)."""
    from tests.waiting import poll_for

    return bool(poll_for(lambda: writer._q.qsize() == 0, 10, what="the writer to take the first write"))


def test_the_state_memo_keeps_the_sessions_saving_now_and_stays_bounded(store: LocalStore) -> None:
    """A soak of one-turn sessions grew the store's heap by each session's remembered state until a clear-all
    at 4,096: the memo keeps the most recently saved sessions only."""
    memo = store.engine.checkpoints.memo
    memo.cap = 8
    for i in range(40):
        save = _save(1, 0, pending=False).model_copy(update={"session_id": f"s-{i}"})
        assert store.client.save_checkpoint(save).seq == 1
        if i % 5 == 0:  # "s-0" saves again now and then: it stays among the kept
            seq = i // 5 + 2
            again = _save(seq, 2 * (seq - 1), pending=False).model_copy(update={"session_id": "s-0"})
            assert store.client.save_checkpoint(again).seq == again.seq
    assert len(memo) == 8
    assert "s-0" in memo._seen and "s-39" in memo._seen and "s-1" not in memo._seen
