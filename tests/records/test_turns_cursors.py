"""Turn records, cursors and dedupe keys, in-process and through the bus."""

from __future__ import annotations

import time

from geode.records.models import TurnRecord, TurnState
from tests.records.conftest import StoreUnderTest


def test_turn_record_lifecycle(store: StoreUnderTest, uid: str) -> None:
    c, tid = store.client, f"slack:C1:{uid}"
    first = c.put_turn(TurnRecord(turn_id=tid, session_id=f"s-{uid}", origin="slack", input={"text": "hi"}))
    assert first.state == TurnState.QUEUED and first.created_at > 0
    running = c.put_turn(
        first.model_copy(
            update={"state": TurnState.RUNNING, "worker": "loop-1", "incarnation": 3, "attempts": 1}
        )
    )
    assert (running.worker, running.incarnation, running.created_at) == ("loop-1", 3, first.created_at)
    assert tid in [t.turn_id for t in c.list_turns(state="running")]
    assert tid not in [t.turn_id for t in c.list_turns(state="queued")]
    done = c.put_turn(
        running.model_copy(update={"state": TurnState.DONE, "outcome": {"reason": "completed"}})
    )
    assert done.outcome == {"reason": "completed"}
    regressed = c.put_turn(first)  # a late re-queue never regresses a done turn
    assert regressed.state == TurnState.DONE
    got = c.get_turn(tid)
    assert got is not None and got.state == TurnState.DONE and c.get_turn(f"nope-{uid}") is None


def test_cursor_per_platform_account_channel(store: StoreUnderTest, uid: str) -> None:
    c = store.client
    assert c.get_cursor("slack", uid, "C1") is None
    c.set_cursor("slack", uid, "C1", "1700000000.000100")
    c.set_cursor("slack", uid, "C2", "5")
    c.set_cursor("telegram", uid, "C1", "77")
    assert c.get_cursor("slack", uid, "C1") == "1700000000.000100"
    assert (c.get_cursor("slack", uid, "C2"), c.get_cursor("telegram", uid, "C1")) == ("5", "77")
    c.set_cursor("slack", uid, "C1", "1700000000.000200")
    assert c.get_cursor("slack", uid, "C1") == "1700000000.000200"


def test_dedupe_keys_with_ttl(store: StoreUnderTest, uid: str) -> None:
    c = store.client
    assert c.dedupe(f"k-{uid}", ttl_s=30) is True
    assert c.dedupe(f"k-{uid}", ttl_s=30) is False
    assert c.dedupe(f"t-{uid}", ttl_s=30, token="r1") is True
    assert c.dedupe(f"t-{uid}", ttl_s=30, token="r1") is True  # the same request retried
    assert c.dedupe(f"t-{uid}", ttl_s=30, token="r2") is False
    assert c.dedupe(f"short-{uid}", ttl_s=0.05) is True
    deadline = time.monotonic() + 5
    while not c.dedupe(f"short-{uid}", ttl_s=0.05):
        assert time.monotonic() < deadline


def test_listing_many_large_turns_is_complete(store: StoreUnderTest, uid: str) -> None:
    c = store.client
    for i in range(60):
        c.put_turn(TurnRecord(turn_id=f"{uid}-{i:03}", session_id=f"big-{uid}", input={"text": "w" * 20_000}))
    got = [t.turn_id for t in c.list_turns(state="queued", session_id=f"big-{uid}")]
    assert got == [f"{uid}-{i:03}" for i in range(60)]  # > 1 MiB in total: paged, nothing dropped
