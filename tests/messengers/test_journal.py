"""The poller's durable pending-reply journal: a bounded ring of slots in the store's cursors table that a
restarted poller reads back (the turns it still owes a reply), settled in any order."""

from __future__ import annotations

import pytest

from geode.messengers import journal
from geode.messengers.journal import PollerState
from geode.protocol.errors import Overloaded
from tests.messengers.poller_fakes import FakeStore


def test_pending_turns_survive_a_restart_and_the_ring_stays_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(journal, "RING", 4)
    store = FakeStore()
    st = PollerState(store, "telegram", "99")
    assert st.load() == []
    for t in ("t0", "t1", "t2", "t3"):
        st.add(t)
    st.add("t1")  # journaled twice (a redelivery): one entry
    with pytest.raises(Overloaded):
        st.add("t4")  # four replies owed: the ring is full
    st.settle("t2")  # out of order: the tail stays at t0
    assert st.tail == 0
    st.settle("t0")
    assert st.tail == 1
    st.add("t4")  # reuses t0's slot
    again = PollerState(store, "telegram", "99")
    assert again.load() == ["t1", "t3", "t4"]
    slots = [c for (_p, _a, c) in store.cursors if c.startswith("pending#")]
    assert len(slots) <= 4
    for t in ("t1", "t3", "t4"):
        again.settle(t)
    assert again.tail == again.head == 5 and PollerState(store, "telegram", "99").load() == []


def test_a_chats_new_session_is_bumped_once_per_message() -> None:
    st = PollerState(FakeStore(), "telegram", "99")
    assert st.generation("100") == 0
    assert st.new_generation("100", "m1") == 1
    assert st.new_generation("100", "m1") == 1  # the same /new redelivered
    assert st.new_generation("100", "m2") == 2 and st.generation("100") == 2
