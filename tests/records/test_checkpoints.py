"""Checkpoint store contracts, in-process and through the bus."""

from __future__ import annotations

import pytest

from geode.home import GeodeHome
from geode.protocol.errors import Conflict
from geode.records.models import CheckpointSave, PendingBatch, PendingOperation, SessionStatus
from tests.records.conftest import StoreUnderTest


def msg(text: str) -> dict[str, object]:
    return {"role": "user", "content": [{"type": "text", "text": text}]}


def test_restore_returns_everything_saved(store: StoreUnderTest, uid: str) -> None:
    sid = f"s-{uid}"
    batch = PendingBatch(
        turn_id="t1",
        step_id="st1",
        operations=(PendingOperation(tool_use_id="tu1", operation_id="op1", name="w"),),
    )
    store.client.save_checkpoint(
        CheckpointSave(
            session_id=sid,
            seq=1,
            base_count=0,
            new_messages=[msg("a"), msg("b")],
            status=SessionStatus.PAUSED,
            cognitive_state={"goal": "g"},
            guard_counters={"llm_failures": 2},
            pending_batch=batch,
            model_settings={"model": "m1"},
            meta={"mode": "IPC", "title": "x"},
        )
    )
    r = store.client.load_checkpoint(sid)
    assert r is not None
    assert r.messages == [msg("a"), msg("b")]
    s = r.state
    assert (s.seq, s.message_count, s.status) == (1, 2, SessionStatus.PAUSED)
    assert s.cognitive_state == {"goal": "g"} and s.guard_counters == {"llm_failures": 2}
    assert s.pending_batch == batch and s.model_settings == {"model": "m1"} and s.meta["title"] == "x"
    assert store.client.load_checkpoint(f"missing-{uid}") is None


def test_saves_are_incremental(store: StoreUnderTest, uid: str) -> None:
    sid = f"s-{uid}"
    store.client.save_checkpoint(CheckpointSave(session_id=sid, seq=1, base_count=0, new_messages=[msg("a")]))
    out = store.client.save_checkpoint(
        CheckpointSave(session_id=sid, seq=2, base_count=1, new_messages=[msg("b")])
    )
    assert out.message_count == 2
    r = store.client.load_checkpoint(sid)
    assert r is not None and [m["content"][0]["text"] for m in r.messages] == ["a", "b"]  # type: ignore[index]
    with pytest.raises(Conflict):  # a gap: the caller thinks the store has more than it has
        store.client.save_checkpoint(
            CheckpointSave(session_id=sid, seq=3, base_count=5, new_messages=[msg("c")])
        )


def test_save_is_idempotent_by_seq(store: StoreUnderTest, uid: str) -> None:
    sid = f"s-{uid}"
    first = CheckpointSave(session_id=sid, seq=1, base_count=0, new_messages=[msg("a")])
    store.client.save_checkpoint(first)
    again = store.client.save_checkpoint(first)
    assert again.noop and again.message_count == 1
    store.client.save_checkpoint(CheckpointSave(session_id=sid, seq=2, base_count=1, new_messages=[msg("b")]))
    assert store.client.save_checkpoint(first).noop  # an old seq resent with the same content
    with pytest.raises(Conflict):
        store.client.save_checkpoint(
            CheckpointSave(session_id=sid, seq=2, base_count=1, new_messages=[msg("X")])
        )
    r = store.client.load_checkpoint(sid)
    assert r is not None and len(r.messages) == 2 and r.state.seq == 2


def test_terminal_sessions_reopen_only_explicitly(store: StoreUnderTest, uid: str) -> None:
    sid = f"s-{uid}"
    c = store.client
    c.save_checkpoint(CheckpointSave(session_id=sid, seq=1, base_count=0, status=SessionStatus.COMPLETED))
    with pytest.raises(Conflict):
        c.save_checkpoint(CheckpointSave(session_id=sid, seq=2, base_count=0, status=SessionStatus.ACTIVE))
    c.save_checkpoint(CheckpointSave(session_id=sid, seq=2, base_count=0, status=SessionStatus.ERROR))
    out = c.save_checkpoint(CheckpointSave(session_id=sid, seq=3, base_count=0, status="active", reopen=True))
    assert out.status == SessionStatus.ACTIVE


def test_rewritten_tail_replaces_messages(store: StoreUnderTest, uid: str) -> None:
    sid = f"s-{uid}"
    c = store.client
    c.save_checkpoint(
        CheckpointSave(session_id=sid, seq=1, base_count=0, new_messages=[msg(x) for x in "abcd"])
    )
    c.save_checkpoint(CheckpointSave(session_id=sid, seq=2, base_count=1, new_messages=[msg("summary")]))
    r = c.load_checkpoint(sid)
    assert r is not None and [m["content"][0]["text"] for m in r.messages] == ["a", "summary"]  # type: ignore[index]


def test_large_restore_is_paged_and_complete(store: StoreUnderTest, uid: str) -> None:
    sid = f"s-{uid}"
    big = [msg(f"{i}:" + "x" * 60_000) for i in range(30)]  # ~1.8 MB: more than one frame
    for i in range(0, 30, 10):
        store.client.save_checkpoint(
            CheckpointSave(session_id=sid, seq=i // 10 + 1, base_count=i, new_messages=big[i : i + 10])
        )
    r = store.client.load_checkpoint(sid)
    assert r is not None and r.messages == big


def test_list_sessions_newest_first_with_unresolved_counts(store: StoreUnderTest, uid: str) -> None:
    from geode.records.models import ReceiptIdentity

    c = store.client
    for n in ("old", "new"):
        c.save_checkpoint(CheckpointSave(session_id=f"{n}-{uid}", seq=1, base_count=0, meta={"title": n}))
    ident = ReceiptIdentity(session_id=f"new-{uid}", turn_id="t", step_id="s", tool_name="w", fingerprint="f")
    c.admit(f"op-{uid}", ident, owner="executor#1", effect="write")
    rows = [s for s in c.list_sessions() if s.session_id.endswith(uid)]
    assert [s.session_id for s in rows] == [f"new-{uid}", f"old-{uid}"]
    assert rows[0].unresolved_receipts == 1 and rows[1].unresolved_receipts == 0


def test_pruning_drops_old_terminal_sessions_only(home, uid: str) -> None:  # type: ignore[no-untyped-def]
    import time

    from geode.records.models import TimelineEvent
    from tests.records.harness import local_store

    ls = local_store(home)
    c = ls.client
    try:
        c.save_checkpoint(
            CheckpointSave(
                session_id="done", seq=1, base_count=0, new_messages=[msg("a")], status="completed"
            )
        )
        c.save_checkpoint(CheckpointSave(session_id="live", seq=1, base_count=0, new_messages=[msg("a")]))
        c.append_timeline(TimelineEvent(session_id="done", event_id="e1", kind="k", ts=1.0))
        assert ls.engine.prune()["sessions"] == 0  # not old enough yet
        out = ls.engine.prune(now=time.time() + 31 * 86400)
        assert out["sessions"] == 1
        assert c.load_checkpoint("done") is None and c.read_timeline("done") == []
        assert c.load_checkpoint("live") is not None
        assert ls.engine.stats()["entries"]["ck_msgs"] == 1
    finally:
        ls.close()


def test_a_long_session_list_is_cut_to_one_reply_and_says_so(
    home: GeodeHome, uid: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """5,000 sessions overflowed the 1 MiB reply frame (seen in the soak): the store cuts and says so."""
    import geode.records.service as service
    from tests.records.conftest import local_store

    monkeypatch.setattr(service, "PAGE_BYTES", 4096)  # a small page stands in for 1 MiB of summaries
    ls = local_store(home)
    try:
        for i in range(60):
            ls.client.save_checkpoint(CheckpointSave(session_id=f"s{i}-{uid}", seq=1, base_count=0))
        page = ls.client.sessions_page(limit=60)
        assert page.truncated and 0 < len(page.sessions) < 60
        assert not ls.client.sessions_page(limit=5).truncated
    finally:
        ls.close()


def test_a_save_says_whether_its_session_holds_an_open_receipt(store: StoreUnderTest, uid: str) -> None:
    """``receipts_open``: an admitted or uncertain receipt of this session (not of a session whose id it
    prefixes, nor of its replies' scope), read in the save's own write; Verify relies on it (RECEIPTS)."""
    from geode.records.models import ReceiptIdentity

    sid = f"s-{uid}"

    def save(seq: int, *, again: bool = False) -> bool | None:
        body = CheckpointSave(session_id=sid, seq=seq, base_count=0 if seq == 1 else 1, new_messages=[])
        if seq == 1:
            body = body.model_copy(update={"new_messages": [msg("a")]})
        out = store.client.save_checkpoint(body)
        assert out.noop is again
        return out.receipts_open

    def admit(session: str, op: str) -> None:
        ident = ReceiptIdentity(session_id=session, turn_id="t", step_id="st", tool_name="w", fingerprint="f")
        store.client.admit(op, ident, owner="executor#1", effect="external")

    admit(f"{sid}0", f"op-{uid}-neighbour")
    admit(f"{sid}#replies", f"op-{uid}-reply")
    assert save(1) is False
    admit(sid, f"op-{uid}-a")
    assert save(2) is True
    assert save(2, again=True) is True  # a repeat reads it again too
    store.client.mark_uncertain(f"op-{uid}-a", "test")
    assert save(3) is True
    store.client.reconcile(f"op-{uid}-a", outcome="not_applied", by="test")
    assert save(4) is False
