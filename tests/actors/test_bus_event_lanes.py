"""``Bus.subscribe``: one SUB socket per endpoint, each subscriber its own lane (actors/bus/event_lanes.py):
its events in order, a slow subscriber never holds up another, and no subscription thread at rest."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from actors.bus import Bus
from actors.bus.event_lanes import EventLane, EventLanes
from geode.home import GeodeHome
from tests.actors.bus_fixtures import FixtureService
from tests.waiting import poll_for


@pytest.fixture
def home(tmp_path: Path) -> GeodeHome:
    return GeodeHome(tmp_path / "h").ensure()


def _event_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if "-events" in t.name]


def test_subscribers_share_one_socket_and_a_slow_one_holds_up_no_other(home: GeodeHome) -> None:
    server = Bus("supervisor", 1, home).start()
    sub = Bus("watcher", 1, home).start()
    release = threading.Event()
    slow: list[str] = []
    fast: list[str] = []
    try:
        server.serve("supervisor", FixtureService("supervisor", 1))

        def on_slow(topic: str, body: dict[str, object]) -> None:
            release.wait(10)  # e.g. the reload rule's apply and 5 s call
            slow.append(topic)

        sub.subscribe("supervisor", on_slow)
        sub.subscribe("supervisor", lambda t, b: fast.append(t))
        poll_for(lambda: len(sub._subs) == 1 and len(_lanes(sub).lanes) == 2, 5, what="both subscribed")

        def delivered() -> bool:  # slow joiner: republish until the subscription is live
            server.publish("warm.up", {})
            return bool(fast)

        poll_for(delivered, 5, interval_s=0.05, what="an event delivered")
        for i in range(5):
            server.publish(f"e.{i}", {"i": i})
        expected = [f"e.{i}" for i in range(5)]

        def ours(seen: list[str]) -> list[str]:
            return [t for t in seen if t.startswith("e.")]  # (warm-ups may still come)

        poll_for(lambda: ours(fast) == expected, 5, what="the fast one's events while the slow one waits")
        assert slow == []  # still in its first event
        release.set()
        poll_for(lambda: ours(slow) == expected, 10, what="the slow one's events, in order")
        poll_for(lambda: not any(lane.active for lane in _lanes(sub).lanes), 5, what="the lanes idle")
        poll_for(lambda: not _event_threads(), 5, what="no subscription thread at rest")
    finally:
        release.set()
        sub.stop()
        server.stop()


def _lanes(bus: Bus) -> EventLanes:
    (s,) = bus._subs.values()
    assert isinstance(s.pool, EventLanes)
    return s.pool


def test_a_lane_runs_its_events_in_order_one_thread_a_burst_and_survives_a_failing_handler() -> None:
    seen: list[int] = []
    gate = threading.Event()

    def on_event(topic: str, body: dict[str, object]) -> None:
        gate.wait(5)
        if body["i"] == 1:
            raise RuntimeError("a handler bug")
        seen.append(int(body["i"]))  # type: ignore[call-overload]

    lane = EventLane(on_event, "t-events-0")
    for i in range(4):
        lane.put("t", {"i": i})
    assert lane.threads_started == 1  # the burst queued behind the first event, one thread
    gate.set()
    poll_for(lambda: seen == [0, 2, 3] and not lane.active, 5, what="the events after the failing one")
    lane.put("t", {"i": 4})
    poll_for(lambda: seen == [0, 2, 3, 4], 5, what="a later event")
    assert lane.threads_started == 2  # a new thread for a new burst: none while idle
    lane.stop()
    lane.put("t", {"i": 5})  # dropped after stop
    time.sleep(0.05)
    assert seen == [0, 2, 3, 4]
