"""The bus thread sleeps in one plain ``poll`` a wake, over file descriptors only (actors/bus/poll_loop.py):
its SUB and monitor sockets are polled by their ``ZMQ_FD`` like the shared sockets, so ``zmq_poll`` (a
zero-timeout pass before each sleep, ``ZMQ_EVENTS`` asked of every zmq socket on each pass) is not called.
The SUB still gets every event published, and the monitored peer connection still says hello."""

from __future__ import annotations

import select
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import zmq

from actors.bus import Bus
from geode.home import GeodeHome
from geode.protocol.transport import Request
from tests.actors.bus_fixtures import ECHO, Echo
from tests.waiting import poll_for

ROUND_TRIPS = 60
REAL_POLL = select.poll


class CountingPoll:
    """A ``select.poll`` that counts its calls and keeps what was registered."""

    def __init__(self) -> None:
        self._p = REAL_POLL()
        self.calls = 0
        self.registered: list[Any] = []

    def register(self, fd: Any, mask: int = select.POLLIN) -> None:
        self.registered.append(fd)
        self._p.register(fd, mask)

    def poll(self, timeout: Any = None) -> list[tuple[int, int]]:
        self.calls += 1
        return self._p.poll(timeout)


class EchoService:
    inline_types = frozenset({ECHO})

    def handle(self, request: Request) -> dict[str, Any]:
        body = request.body
        assert isinstance(body, Echo)
        return {"text": body.text}


@pytest.fixture(scope="module")
def buses(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    home = GeodeHome(Path(tmp_path_factory.mktemp("onepoll")) / "h").ensure()
    polls: list[CountingPoll] = []

    def counting() -> Any:
        polls.append(CountingPoll())
        return polls[-1]

    zmq_polls: dict[int, int] = {}
    real_zmq_poll = zmq.Poller.poll

    def zmq_poll(poller: zmq.Poller, timeout: Any = None) -> Any:
        zmq_polls[id(poller)] = zmq_polls.get(id(poller), 0) + 1
        return real_zmq_poll(poller, timeout)

    mp = pytest.MonkeyPatch()
    mp.setattr(zmq.Poller, "poll", zmq_poll)
    with pytest.MonkeyPatch.context() as only_here:
        only_here.setattr(select, "poll", counting)
        server = Bus("osrv", 1, home)
    publisher = Bus("opub", 1, home).start()
    peer = Bus("opeer", 1, home).start()
    client = Bus("ocli", 1, home).start()
    server.start()
    events: list[str] = []
    connected = threading.Event()
    try:
        peer.serve("opeer-in", EchoService())
        server.serve("osrv-in", EchoService())
        server.subscribe("opub", lambda topic, body: events.append(topic))
        server.connect_peer("opeer-in", lambda request: None, on_connected=connected.set)
        yield {
            "home": home,
            "server": server,
            "publisher": publisher,
            "peer": peer,
            "client": client,
            "events": events,
            "connected": connected,
            "poll": polls[0] if polls else None,
            "zmq_polls": lambda: zmq_polls.get(id(server._poller), 0),
        }
    finally:
        mp.undo()
        for bus in (client, peer, publisher, server):
            bus.stop()


def test_a_wake_is_one_plain_poll_over_file_descriptors(buses: dict[str, Any]) -> None:
    tr = buses["client"].transport
    assert tr.call("osrv-in", ECHO, {"text": "warm"}, timeout_s=10)["text"] == "warm"
    poll, zmq_polls = buses["poll"], buses["zmq_polls"]
    z0 = zmq_polls()
    p0 = poll.calls if poll is not None else 0
    for i in range(ROUND_TRIPS):
        assert tr.call("osrv-in", ECHO, {"text": f"o{i}"}, timeout_s=10) == {"text": f"o{i}"}
    # before: every wake was a zmq_poll over the SUB and the monitor sockets as well as the fds
    assert zmq_polls() - z0 == 0
    assert poll is not None and all(isinstance(fd, int) for fd in poll.registered)
    assert poll.calls - p0 <= ROUND_TRIPS * 2  # one per wake: a request's, a hello's tick, a stray edge


def test_the_sub_and_the_monitor_still_deliver(buses: dict[str, Any]) -> None:
    publisher, events = buses["publisher"], buses["events"]

    def delivered() -> bool:  # a SUB joins a little after its connect: publish until the first arrives
        publisher.publish("test.tick")
        return "test.tick" in events

    poll_for(delivered, timeout_s=10, interval_s=0.05)
    n = len(events)
    for _ in range(50):
        publisher.publish("test.burst")
    poll_for(lambda: events.count("test.burst") == 50, timeout_s=10, interval_s=0.02)
    assert len(events) >= n + 50
    # the peer restarts: the connection's new handshake, seen by its monitor socket, says hello at once
    buses["connected"].clear()
    buses["peer"].stop()
    again = Bus("opeer", 2, buses["home"]).start()
    try:
        again.serve("opeer-in", EchoService())
        assert buses["connected"].wait(10)
        poll_for(lambda: "osrv" in again.peers("opeer-in"), timeout_s=10, interval_s=0.05)
    finally:
        again.stop()
