"""The store answers durable writes from its writer thread: many writes in flight park no handler thread."""

from __future__ import annotations

import threading
from pathlib import Path

from actors.bus import Bus
from actors.store import start_store
from geode.home import GeodeHome
from geode.protocol import store as m
from geode.records.models import TimelineEvent
from geode.records.store_client import StoreClient
from tests.waiting import poll_for


def test_twenty_writes_share_one_group_commit_with_a_single_handler_thread(tmp_path: Path) -> None:
    home = GeodeHome(tmp_path / "h").ensure()
    server = Bus("store", 1, home, single_process=True).start()
    client = Bus("tester", 1, home, single_process=True).start()
    store = start_store(home, bus=server, concurrency=1)
    gate, inside = threading.Event(), threading.Event()

    def hold(txn: object) -> bool:
        inside.set()
        return gate.wait(10)

    try:
        writer = store.engine.writer
        blocker = writer.submit(hold)  # holds the writer: the next writes queue up
        assert inside.wait(5), "the writer did not start the blocking write"  # none of the 20 joins its batch
        calls = [
            client.transport.call_nowait(
                "store",
                m.TIMELINE_APPEND,
                TimelineEvent(session_id="s", event_id=f"e{i}", kind="k", ts=1.0, payload={"i": i}),
                timeout_s=10,
            )
            for i in range(20)
        ]
        # before: one handler thread blocked in the first write until its commit, so one write queued
        poll_for(lambda: writer._q.qsize() >= 20, 5, what="all 20 writes queued for the writer at once")
        batches = writer.stats.batches
        gate.set()
        blocker.result(5)
        assert sorted(c()["seq"] for c in calls) == list(range(1, 21))
        assert writer.stats.batches - batches <= 2  # the blocker's batch, then the 20 together
        assert writer.stats.max_batch >= 20
        local = StoreClient(client.transport)
        assert [r.seq for r in local.read_timeline("s")] == list(range(1, 21))
        assert local.stats()["writer"]["ops"] >= 21
    finally:
        gate.set()
        client.stop()
        server.stop()
        store.stop()  # the engine (the bus was ours)
