"""Effect receipt contracts (reference §4.6), in-process and through the bus."""

from __future__ import annotations

import pytest

from geode.protocol import runtime
from geode.protocol.errors import Conflict, NotFound
from geode.records.models import AdmitKind, ReceiptIdentity, ReceiptState
from tests.records.conftest import StoreUnderTest


def ident(uid: str, step: str = "s1", fp: str = "f1", session: str = "") -> ReceiptIdentity:
    return ReceiptIdentity(
        session_id=session or f"sess-{uid}", turn_id="t1", step_id=step, tool_name="write", fingerprint=fp
    )


def test_new_then_commit_then_replay(store: StoreUnderTest, uid: str) -> None:
    c, op = store.client, f"op-{uid}"
    assert c.admit(op, ident(uid), owner="executor#1", effect="write").kind == AdmitKind.NEW
    c.commit(op, {"ok": True, "n": 3})
    again = c.admit(op, ident(uid), owner="executor#2", effect="write")
    assert again.kind == AdmitKind.REPLAY and again.result == {"ok": True, "n": 3}
    c.commit(op, {"ok": True, "n": 3})  # a retried commit is a no-op
    with pytest.raises(Conflict):
        c.commit(op, {"ok": False})
    r = c.get_receipt(op)
    assert r is not None and r.state == ReceiptState.COMMITTED and r.owner == "executor#1"


def test_admitted_op_is_uncertain_for_a_new_attempt(store: StoreUnderTest, uid: str) -> None:
    c, op = store.client, f"op-{uid}"
    assert c.admit(op, ident(uid), owner="executor#1", attempt="a1").kind == AdmitKind.NEW
    assert (
        c.admit(op, ident(uid), owner="executor#1", attempt="a1").kind == AdmitKind.NEW
    )  # lost reply, retried
    again = c.admit(op, ident(uid), owner="executor#1", attempt="a2")
    assert again.kind == AdmitKind.UNCERTAIN and again.blocking_operation == op


def test_conflict_on_a_different_identity(store: StoreUnderTest, uid: str) -> None:
    c, op = store.client, f"op-{uid}"
    c.admit(op, ident(uid), owner="executor#1")
    assert c.admit(op, ident(uid, fp="other"), owner="executor#1").kind == AdmitKind.CONFLICT
    c.commit(op, {"ok": 1})
    assert c.admit(op, ident(uid, step="s9"), owner="executor#1").kind == AdmitKind.CONFLICT


def test_owner_died_turns_its_admitted_receipts_uncertain(store: StoreUnderTest, uid: str) -> None:
    c = store.client
    name = f"exec{uid}"
    c.admit(f"a-{uid}", ident(uid, session=f"x-{uid}"), owner=f"{name}#1")
    c.admit(f"b-{uid}", ident(uid, session=f"y-{uid}"), owner=f"{name}#2")
    c.admit(f"c-{uid}", ident(uid, session=f"z-{uid}"), owner=f"{name}#2")
    c.commit(f"c-{uid}", {"done": 1})
    c.admit(f"d-{uid}", ident(uid, session=f"w-{uid}"), owner=f"other{uid}#1")
    assert c.owner_died(name, 1) == 1
    states = {k: c.get_receipt(f"{k}-{uid}").state for k in "abcd"}  # type: ignore[union-attr]
    assert states == {"a": "uncertain", "b": "admitted", "c": "committed", "d": "admitted"}
    assert c.owner_died(name, 2) == 1
    assert c.get_receipt(f"b-{uid}").state == ReceiptState.UNCERTAIN  # type: ignore[union-attr]
    assert c.admit(f"b-{uid}", ident(uid, session=f"y-{uid}"), owner=f"{name}#3").kind == AdmitKind.UNCERTAIN


def test_child_died_message_marks_owner_receipts(store: StoreUnderTest, uid: str) -> None:
    c = store.client
    c.admit(f"a-{uid}", ident(uid), owner=f"ex{uid}#4")
    c.transport.call("store", runtime.CHILD_DIED, {"name": f"ex{uid}", "incarnation": 4, "reason": "SIGKILL"})
    r = c.get_receipt(f"a-{uid}")
    assert r is not None and r.state == ReceiptState.UNCERTAIN and "died" in (r.uncertain_reason or "")


def test_quarantine_blocks_later_steps_until_reconciled(store: StoreUnderTest, uid: str) -> None:
    c = store.client
    c.admit(f"a-{uid}", ident(uid, step="s1"), owner="executor#1")
    c.mark_uncertain(f"a-{uid}", "deadline passed")
    assert c.admit(f"b-{uid}", ident(uid, step="s1", fp="f2"), owner="executor#1").kind == AdmitKind.NEW
    blocked = c.admit(f"c-{uid}", ident(uid, step="s2"), owner="executor#1")
    assert blocked.kind == AdmitKind.UNCERTAIN and blocked.blocking_operation in (f"a-{uid}", f"b-{uid}")
    other = c.admit(f"d-{uid}", ident(uid, step="s2", session=f"other-{uid}"), owner="executor#1")
    assert other.kind == AdmitKind.NEW
    c.reconcile(f"a-{uid}", outcome="not_applied", by="op")
    c.commit(f"b-{uid}", {"ok": 1})
    assert c.get_receipt(f"c-{uid}") is None  # the blocked admit stored nothing
    assert c.admit(f"c-{uid}", ident(uid, step="s2"), owner="executor#1").kind == AdmitKind.NEW


def test_reconcile_records_verdict_and_replays_it(store: StoreUnderTest, uid: str) -> None:
    c, op = store.client, f"op-{uid}"
    c.admit(op, ident(uid), owner="executor#1")
    c.owner_died("executor", 1) if store.kind == "local" else c.mark_uncertain(op, "lost")
    r = c.reconcile(op, outcome="applied", by="alice", note="checked the file")
    assert r.state == ReceiptState.RECONCILED and r.outcome == "applied" and r.reconciled_by == "alice"
    assert r.note == "checked the file" and r.reconciled_at is not None
    assert c.reconcile(op, outcome="applied", by="alice").outcome == "applied"  # idempotent
    with pytest.raises(Conflict):
        c.reconcile(op, outcome="not_applied", by="bob")
    replay = c.admit(op, ident(uid), owner="executor#2")
    assert replay.kind == AdmitKind.REPLAY and replay.result is not None
    assert replay.result["external_effect_applied"] is True
    with pytest.raises(NotFound):
        c.reconcile(f"missing-{uid}", outcome="applied", by="x")


def test_stored_results_are_bounded(store: StoreUnderTest, uid: str) -> None:
    c, op = store.client, f"op-{uid}"
    c.admit(op, ident(uid), owner="executor#1")
    c.commit(op, {"out": "y" * 50_000, "items": list(range(500))})
    r = c.get_receipt(op)
    assert r is not None and r.result is not None
    assert len(str(r.result)) < 34_000


def test_list_receipts_filters(store: StoreUnderTest, uid: str) -> None:
    c = store.client
    c.admit(f"a-{uid}", ident(uid, session=f"p-{uid}"), owner="executor#1")
    c.admit(f"b-{uid}", ident(uid, session=f"q-{uid}"), owner="executor#1")
    c.mark_uncertain(f"b-{uid}", "timeout")
    assert [r.operation_id for r in c.list_receipts(session_id=f"p-{uid}")] == [f"a-{uid}"]
    unc = [r.operation_id for r in c.list_receipts(uncertain_only=True) if r.operation_id.endswith(uid)]
    assert unc == [f"b-{uid}"]
    assert c.list_receipts(session_id=f"q-{uid}", uncertain_only=True)[0].uncertain_reason == "timeout"


def test_old_committed_receipts_are_pruned(home, uid: str) -> None:  # type: ignore[no-untyped-def]
    import time

    from geode.records.settings import StoreConfig
    from tests.records.harness import local_store

    ls = local_store(home, StoreConfig(receipt_keep=3))
    try:
        for i in range(6):
            ls.client.admit(f"op{i}", ident(uid, session=f"s{i}"), owner="executor#1")
            ls.client.commit(f"op{i}", {"i": i})
        ls.client.admit("open", ident(uid, session="sx"), owner="executor#1")
        assert ls.engine.receipts.prune() == 3
        assert [ls.client.get_receipt(f"op{i}") is None for i in range(6)] == [True] * 3 + [False] * 3
        assert ls.engine.receipts.prune(now=time.time() + 31 * 86400) == 3
        assert ls.client.get_receipt("open") is not None  # unresolved receipts are never pruned
    finally:
        ls.close()


def test_too_many_unresolved_receipts_is_unavailable(home, uid: str) -> None:  # type: ignore[no-untyped-def]
    from geode.protocol.errors import Unavailable
    from geode.records.settings import StoreConfig
    from tests.records.harness import local_store

    ls = local_store(home, StoreConfig(max_unresolved_receipts=2))
    ls.client.attempts = 1
    try:
        ls.client.admit("a", ident(uid, session="s1"), owner="executor#1")
        ls.client.admit("b", ident(uid, session="s2"), owner="executor#1")
        with pytest.raises(Unavailable):
            ls.client.admit("c", ident(uid, session="s3"), owner="executor#1")
    finally:
        ls.close()


def test_listing_receipts_with_large_results_stays_under_the_frame_cap(
    store: StoreUnderTest, uid: str
) -> None:
    c = store.client
    for i in range(60):
        c.admit(f"big{i}-{uid}", ident(uid, session=f"big-{uid}"), owner="executor#1")
        c.commit(f"big{i}-{uid}", {"a": "r" * 10_000, "b": "s" * 10_000, "c": "t" * 10_000})
    rows = c.list_receipts(session_id=f"big-{uid}")
    assert len(rows) == 60 and any(r.result == {"omitted": True, "hint": "store.receipt.get"} for r in rows)
    full = c.get_receipt(rows[-1].operation_id)
    assert full is not None and full.result is not None and len(full.result["c"]) == 10_000
