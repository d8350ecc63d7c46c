"""The webhook intake table over the bus against a real store child: two recorders (two bus connections, as
two webhooks incarnations or two HTTP threads would be) record the same deliveries at once, and each delivery
is recorded exactly once with one turn id; racing past a route's queue bound records exactly the bound."""

from __future__ import annotations

import threading
from collections.abc import Callable

from actors.bus import Bus
from geode.home import GeodeHome
from geode.records.intake_client import IntakeClient
from geode.records.intake_models import RecordResult
from geode.records.store_client import StoreClient
from geode.webhooks.ids import delivery_turn_id

N = 30


def race(
    home: GeodeHome, work: Callable[[IntakeClient, int], list[RecordResult]]
) -> list[list[RecordResult]]:
    """Run ``work(client, i)`` for i = 0, 1 at once, each on its own bus connection, from one barrier."""
    buses = [Bus(f"hooks-{i}", 1, home).start() for i in range(2)]
    barrier = threading.Barrier(2)
    out: list[list[RecordResult]] = [[], []]

    def run(i: int) -> None:
        client = IntakeClient(buses[i].transport, timeout_s=10.0)
        barrier.wait(10)
        out[i] = work(client, i)

    try:
        threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert not any(t.is_alive() for t in threads)
    finally:
        for bus in buses:
            bus.stop()
    return out


def record(client: IntakeClient, route: str, key: str, queue_max: int) -> RecordResult:
    body = f'{{"delivery":"{key}"}}'.encode()
    return client.record(route, key, window_s=None, queue_max=queue_max, headers={}, body=body, client="c")


def test_two_recorders_of_the_same_deliveries_record_each_once(
    bus_store: tuple[GeodeHome, StoreClient],
) -> None:
    home, _ = bus_store
    keys = [f"72d3162e-{i:04d}" for i in range(N)]
    results = race(home, lambda c, i: [record(c, "github", k, 1000) for k in keys])
    for k, a, b in zip(keys, *results, strict=True):
        assert [a.replayed, b.replayed].count(False) == 1, f"{k} recorded by both recorders (or by none)"
        assert a.row is not None and b.row is not None and a.row == b.row
        assert a.row.turn_id == delivery_turn_id("github", k)
    bus = Bus("hooks-check", 1, home).start()
    try:
        check = IntakeClient(bus.transport, timeout_s=10.0)
        assert check.counts().routes["github"] == {"recorded": N}
        assert check.counts().open["github"] == N
        assert sorted(r.delivery_id for r in check.open_rows() if r.route == "github") == keys

        # past the queue bound: each delivery once, and exactly the bound recorded
        bound = 7
        racing = [f"b-{i}" for i in range(20)]
        results = race(home, lambda c, i: [record(c, "bounded", k, bound) for k in racing[:: 1 - 2 * i]])
        recorded = {r.row.delivery_id for rs in results for r in rs if r.row is not None and not r.replayed}
        assert len(recorded) == bound
        assert all(r.row is None and r.open == bound for rs in results for r in rs if r.full)
        assert check.counts().open["bounded"] == bound
        assert {r.delivery_id for r in check.recent("bounded", limit=50)} == recorded
    finally:
        bus.stop()
