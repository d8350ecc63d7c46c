"""A new turn of a session this process saved last opens from the process's own copy (issue 34, session 4):
no store read; the turn's open save is the fence. Anyone else's save since (its seq) or a session recreated
since (its creation time) makes the store refuse it, and the turn opens again from a store read, its hooks
answered once."""

from __future__ import annotations

from typing import Any

import pytest

from geode.conversation import Message
from geode.loop import LoopSettings, checkpoint
from geode.loop.checkpoint import _kept_history
from geode.loop.ports import HookOutcome, NoHooks
from geode.protocol import store as m
from geode.records.models import CheckpointSave
from tests.loop.conftest import Rig, store_calls, tool

SEQ = LoopSettings(model="test-model", tool_parallelism=1)


def test_a_new_turn_after_this_processs_own_save_asks_the_store_no_restore(
    fake_rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before: every turn began with ``store.checkpoint.load`` (a text turn: 4 store requests, then 3; 2 since
    Verify takes the open save's answer that the session holds no open receipt: RECEIPTS, session 6)."""
    rig = fake_rig
    loop = rig.loop(rig.script("one", "two", "three"), settings=SEQ)
    assert loop.run_turn("kept-s1", "turn-1", "first").text == "one"
    assert loop.run_turn("kept-s1", "turn-2", "second").text == "two"  # learns the session's creation time
    calls = store_calls(rig, monkeypatch)
    assert loop.run_turn("kept-s1", "turn-3", "third").text == "three"
    assert calls == [m.CHECKPOINT_SAVE, m.CHECKPOINT_SAVE]  # open, final
    stored = rig.records.load_checkpoint("kept-s1")
    texts = [Message.model_validate(x).text for x in stored.messages]
    assert texts == ["first", "one", "second", "two", "third", "three"]
    assert stored.state.meta["done_turn"] == "turn-3" and stored.state.meta["event_seq"] > 0


def test_the_kept_copy_is_the_store_s_own_record_and_messages(fake_rig: Rig) -> None:
    """The worker builds its copy of the state record itself (no read): it must be what the store wrote, or a
    kept turn would open from a state the store does not hold (meta, guards, status, counts)."""
    loop = fake_rig.loop(fake_rig.script("one", "two", "three"), settings=SEQ)
    for i, prompt in enumerate(("first", "second", "third"), 1):
        loop.run_turn("kept-s4", f"turn-{i}", prompt)
        kept = _kept_history("kept-s4")
        if i == 1:  # the first turn learns the session's creation time only from the store
            continue
        stored = fake_rig.records.load_checkpoint("kept-s4")
        record = kept.record() if kept is not None else None
        assert kept is not None and record is not None and stored is not None
        assert kept.seq == stored.state.seq
        assert [x.model_dump(mode="json") for x in kept.messages] == [
            Message.model_validate(x).model_dump(mode="json") for x in stored.messages
        ]
        mine = record.model_dump(mode="json", exclude={"updated_at"})
        assert mine == stored.state.model_dump(mode="json", exclude={"updated_at"})


class CountingHooks(NoHooks):
    def __init__(self) -> None:
        self.prompts: list[str] = []

    def user_prompt_submit(self, payload: dict[str, Any], correlation: dict[str, str]) -> HookOutcome:
        self.prompts.append(payload["prompt"])
        return HookOutcome(action="rewrite", updates={"prompt": payload["prompt"].upper()})


def test_a_save_by_another_writer_since_makes_the_turn_read_the_store_its_hook_run_once(
    fake_rig: Rig,
) -> None:
    """The other worker's save (seq moved): the open save is refused, the turn reads the session again and
    builds on the other's message (never over it); UserPromptSubmit ran once, its rewrite kept."""
    rig = fake_rig
    hooks = CountingHooks()
    model = rig.script("one", "two", "three")
    loop = rig.loop(model, settings=SEQ, hooks=hooks)
    loop.run_turn("kept-s2", "turn-1", "first")
    loop.run_turn("kept-s2", "turn-2", "second")
    state = rig.records.load_checkpoint("kept-s2").state
    other = Message.user_text("written by the other worker").model_dump(mode="json")
    rig.records.save_checkpoint(
        CheckpointSave(
            session_id="kept-s2", seq=state.seq + 1, base_count=state.message_count, new_messages=[other]
        )
    )
    assert loop.run_turn("kept-s2", "turn-3", "third").text == "three"
    assert hooks.prompts == ["first", "second", "third"]  # once a turn, the refused open included
    texts = [Message.model_validate(x).text for x in rig.records.load_checkpoint("kept-s2").messages]
    assert texts[-4:] == ["two", "written by the other worker", "THIRD", "three"]
    assert [x.text for x in model.requests[-1].messages][-2:] == ["written by the other worker", "THIRD"]
    kinds = [r.event.kind for r in rig.records.read_timeline("kept-s2")]
    assert kinds.count("turn.started") == 3 and kinds.count("turn.ended") == 3


def test_a_session_recreated_since_refuses_the_open_save_by_its_creation_time(fake_rig: Rig) -> None:
    """Deleted (retention) and made again with as many messages at a lower seq: the seq alone would take the
    save on top of the new session; its creation time refuses it and the turn reads the new session."""
    rig = fake_rig
    model = rig.script("one", "two", "three")
    loop = rig.loop(model, settings=SEQ)
    loop.run_turn("kept-s3", "turn-1", "first")
    loop.run_turn("kept-s3", "turn-2", "second")
    assert rig.records.load_checkpoint("kept-s3").state.seq > 1
    store = rig.records.inner.transport._services["store"].engine  # the store's own engine (in-process)
    store.writer.run(lambda txn: store.checkpoints.delete_session(txn, "kept-s3"))
    fresh = [Message.user_text(f"new session {i}").model_dump(mode="json") for i in range(6)]
    rig.records.save_checkpoint(CheckpointSave(session_id="kept-s3", seq=1, base_count=0, new_messages=fresh))
    assert loop.run_turn("kept-s3", "turn-3", "third").text == "three"
    texts = [Message.model_validate(x).text for x in rig.records.load_checkpoint("kept-s3").messages]
    assert texts == [*(f"new session {i}" for i in range(6)), "third", "three"]
    assert [x.text for x in model.requests[-1].messages][:1] == ["new session 0"]


def test_a_save_builds_no_state_record_only_the_turn_that_opens_from_it(
    fake_rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The kept copy holds the state record's fields; the model is made when a turn opens from it (once a
    turn), not at every save (before: one ``CheckpointState.model_construct`` a save, ~7 us)."""
    from geode.records.models import CheckpointState

    loop = fake_rig.loop(fake_rig.script("one", "two", "three", "four"), settings=SEQ)
    loop.run_turn("kept-s5", "turn-1", "first")
    loop.run_turn("kept-s5", "turn-2", "second")  # learns the session's creation time
    made: list[int] = []
    construct = CheckpointState.model_construct

    def counting(*a: Any, **k: Any) -> Any:
        made.append(1)
        return construct(*a, **k)

    monkeypatch.setattr(CheckpointState, "model_construct", counting)
    assert loop.run_turn("kept-s5", "turn-3", "third").text == "three"
    assert loop.run_turn("kept-s5", "turn-4", "fourth").text == "four"
    assert len(made) == 2  # one a turn (its open); before: one a save (open, final): 4


def test_the_kept_copy_grows_with_each_save_not_copied_whole(
    fake_rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each save of a turn keeps the store's messages by growing one copy with its new messages (a save
    used to copy the whole history into a tuple: two or three a tool round); the copy is what the store
    holds."""
    rig = fake_rig
    replies = [{"tool_calls": [tool("write", f"w{i}", text=f"T{i}")]} for i in range(3)]
    loop = rig.loop(rig.script("one", *replies, "done"), settings=SEQ)
    loop.run_turn("kept-s5", "turn-1", "first")  # learns the session's creation time
    sources: list[Any] = []
    keep = checkpoint._keep

    def watch(session_id: str, kept: Any) -> None:
        keep(session_id, kept)
        if kept is not None:
            sources.append((kept.source, kept.size))

    monkeypatch.setattr(checkpoint, "_keep", watch)
    loop.run_turn("kept-s5", "turn-2", "write three")
    assert len(sources) >= 4  # the open save, each round's pending save, the final save
    assert all(src is sources[0][0] for src, _ in sources)  # one list, grown in place
    assert [n for _, n in sources] == sorted(n for _, n in sources)
    kept, stored = _kept_history("kept-s5"), rig.records.load_checkpoint("kept-s5")
    assert kept is not None and stored is not None and kept.size == len(stored.messages)
    assert [x.model_dump(mode="json") for x in kept.messages] == [
        Message.model_validate(x).model_dump(mode="json") for x in stored.messages
    ]
