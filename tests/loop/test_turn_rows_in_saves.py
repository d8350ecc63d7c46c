"""A turn's timeline rows ride its checkpoint saves (issue 34, session 4): ``turn.started`` is written in the
turn open's own store write, ``verification.decided`` and ``turn.ended`` in the final save's, so the rows are
durable exactly when those saves are and a one-round turn asks the store 5 times instead of 7."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from geode.loop import LoopSettings
from geode.loop.ports import ListSink
from geode.protocol.errors import Conflict
from geode.protocol.turns import TerminationReason, TurnEvent, TurnEventKind
from geode.records.models import CheckpointSave, TimelineEvent
from tests.loop.conftest import Rig
from tests.loop.fakes import Crash, open_store

SEQ = LoopSettings(model="test-model", tool_parallelism=1)


class DiesAfterTheOpen(ListSink):
    """The worker dies right after the turn open's save returned (its event is the next thing it does)."""

    def emit(self, event: TurnEvent) -> None:
        if event.kind == TurnEventKind.CHECKPOINT_SAVED and event.data.get("phase") == "turn_open":
            raise Crash("killed after the turn's open")
        super().emit(event)


def test_a_turn_cut_right_after_its_open_still_shows_its_start(fake_rig: Rig) -> None:
    """Before: ``turn.started`` was a second request after the open's save, so a worker killed between the
    two left a resumed turn without it (the resume does not open the turn again)."""
    rig = fake_rig
    rig.sink = DiesAfterTheOpen()
    with pytest.raises(Crash):
        rig.loop(rig.script("never asked"), settings=SEQ).run_turn("rows-s1", "turn-1", "hello")
    assert [m["role"] for m in rig.records.load_checkpoint("rows-s1").messages] == ["user"]  # the open
    rig.sink = ListSink()
    result = rig.loop(rig.script("hi"), settings=SEQ).run_turn("rows-s1", "turn-1", "hello", resume=True)
    assert result.termination_reason == TerminationReason.NATURAL and result.text == "hi"
    kinds = [r.event.kind for r in rig.records.read_timeline("rows-s1")]
    assert kinds == ["turn.started", "verification.decided", "turn.ended"]


def _row(sid: str, event_id: str, kind: str, **payload: object) -> TimelineEvent:
    return TimelineEvent(session_id=sid, event_id=event_id, kind=kind, ts=time.time(), payload=payload)


def test_a_saves_rows_are_written_with_it_and_not_without_it(tmp_path: Path) -> None:
    """The store side (the bus's path): the rows commit with the save, redacted like any row; a refused save
    writes none of its rows; a row refused for its event id leaves the save and the other rows standing."""
    engine, client = open_store(tmp_path)
    try:
        secret = "sk-ant-" + "a1" * 24
        first = CheckpointSave(
            session_id="s", seq=1, base_count=0, timeline=[_row("s", "e1", "turn.started", key=secret)]
        )
        assert client.save_checkpoint(first).seq == 1
        rows = client.read_timeline("s")
        assert [r.event.event_id for r in rows] == ["e1"] and secret not in str(rows[0].event.payload)
        refused = CheckpointSave(  # seq 1 again with other content: a conflict, nothing of it written
            session_id="s", seq=1, base_count=0, meta={"x": 1}, timeline=[_row("s", "e2", "turn.ended")]
        )
        with pytest.raises(Conflict):
            client.save_checkpoint(refused)
        assert [r.event.event_id for r in client.read_timeline("s")] == ["e1"]
        second = CheckpointSave(  # e1 again with another kind: that row is left out, the rest commits
            session_id="s",
            seq=2,
            base_count=0,
            timeline=[_row("s", "e1", "other.kind"), _row("s", "e3", "turn.ended")],
        )
        assert client.save_checkpoint(second).seq == 2
        assert [r.event.kind for r in client.read_timeline("s")] == ["turn.started", "turn.ended"]
        state = engine.checkpoints.state("s")
        assert state is not None and state.seq == 2
    finally:
        engine.close()


def test_the_turns_rows_are_written_alone_when_its_final_save_fails(fake_rig: Rig) -> None:
    """Not a new behaviour (passes before the change too): the end rows never depended on the final save."""
    rig = fake_rig
    provider = rig.script("the answer")
    loop = rig.loop(provider, settings=SEQ)
    saves = rig.records.saves

    def fail_the_final_save(save: CheckpointSave) -> object:
        if save.meta.get("done_turn"):
            raise OSError("store unavailable (test)")
        saves.append(save)
        return rig.records.inner.save_checkpoint(save)

    rig.records.save_checkpoint = fail_the_final_save  # type: ignore[method-assign]
    assert loop.run_turn("rows-s3", "turn-1", "hello").text == "the answer"
    kinds = [r.event.kind for r in rig.records.read_timeline("rows-s3")]
    assert kinds == ["turn.started", "verification.decided", "turn.ended"]
