"""A request's reply on a request-only DEALER is read by the thread waiting for it, not by the bus thread
(actors/bus/reply_reader.py): one waiter leads and reads, the others follow and are resolved by it, the next
one leads when the leader's own reply came; a failed request, a timeout and a stopped bus still end every
wait."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from actors.bus import Bus
from geode.home import GeodeHome
from geode.protocol.errors import RequestTimeout, Unavailable
from geode.protocol.transport import Request
from tests.actors.bus_fixtures import ECHO, Echo
from tests.waiting import poll_for

HOLD_S = 10.0  # a held handler gives up after this (a bug must not hang the test)


class GatedService:
    """Echoes ``text``; a text starting ``hold`` is answered once the test opens its gate."""

    def __init__(self) -> None:
        self.gates: dict[str, threading.Event] = {}
        self.arrived: dict[str, threading.Event] = {}
        self._lock = threading.Lock()

    def gate(self, text: str) -> tuple[threading.Event, threading.Event]:
        with self._lock:
            return (
                self.gates.setdefault(text, threading.Event()),
                self.arrived.setdefault(text, threading.Event()),
            )

    def handle(self, request: Request) -> dict[str, Any]:
        body = request.body
        assert isinstance(body, Echo)
        if body.text.startswith("hold"):
            gate, arrived = self.gate(body.text)
            arrived.set()
            gate.wait(HOLD_S)
        return {"text": body.text}


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Bus, Bus, GatedService]]:
    home = GeodeHome(Path(tmp_path_factory.mktemp("reader")) / "h").ensure()
    server = Bus("rsrv", 1, home).start()
    client = Bus("rcli", 1, home).start()
    svc = GatedService()
    server.serve("gated", svc, concurrency=8)
    try:
        yield server, client, svc
    finally:
        client.stop()
        server.stop()


def _switches(tid: int | None) -> int:
    status = Path(f"/proc/self/task/{tid}/status").read_text()
    return sum(int(line.split()[1]) for line in status.splitlines() if "ctxt_switches" in line)


def test_the_caller_reads_its_own_reply_and_the_bus_thread_sleeps(
    pair: tuple[Bus, Bus, GatedService],
) -> None:
    """Before: the bus thread polled the DEALER, woke for every reply and woke the caller (two threads woken
    per round trip on the client); now the caller reads the reply itself and the bus thread stays asleep."""
    _, client, _ = pair
    call = client.transport.call
    assert call("gated", ECHO, {"text": "warm"}, timeout_s=10)["text"] == "warm"
    assert client._thread is not None
    before = _switches(client._thread.native_id)
    for i in range(200):
        assert call("gated", ECHO, {"text": f"m{i}"}, timeout_s=10)["text"] == f"m{i}"
    woken = _switches(client._thread.native_id) - before
    assert woken < 20, f"the client's bus thread was switched to {woken} times for 200 round trips"


def test_a_follower_is_answered_while_the_leader_still_waits(pair: tuple[Bus, Bus, GatedService]) -> None:
    """A waits on a held reply (it leads); B's reply, read by A, ends B's wait; releasing A ends A's."""
    _, client, svc = pair
    gate, arrived = svc.gate("hold-a")
    with ThreadPoolExecutor(2) as pool:
        a = pool.submit(client.transport.call, "gated", ECHO, {"text": "hold-a"}, timeout_s=HOLD_S)
        assert arrived.wait(HOLD_S)
        assert poll_for(lambda: client._clients["gated"].reader.leader is not None, timeout_s=HOLD_S)  # type: ignore[union-attr]
        b = pool.submit(client.transport.call, "gated", ECHO, {"text": "quick"}, timeout_s=HOLD_S)
        assert b.result(HOLD_S)["text"] == "quick"
        assert not a.done()
        gate.set()
        assert a.result(HOLD_S)["text"] == "hold-a"


def test_the_next_waiter_leads_when_the_leader_leaves(pair: tuple[Bus, Bus, GatedService]) -> None:
    """Two held replies: the first released ends its caller's wait; the other caller then reads its own."""
    _, client, svc = pair
    (gate1, in1), (gate2, in2) = svc.gate("hold-1"), svc.gate("hold-2")
    with ThreadPoolExecutor(2) as pool:
        first = pool.submit(client.transport.call, "gated", ECHO, {"text": "hold-1"}, timeout_s=HOLD_S)
        second = pool.submit(client.transport.call, "gated", ECHO, {"text": "hold-2"}, timeout_s=HOLD_S)
        assert in1.wait(HOLD_S) and in2.wait(HOLD_S)
        gate1.set()
        assert first.result(HOLD_S)["text"] == "hold-1"
        gate2.set()
        assert second.result(HOLD_S)["text"] == "hold-2"


def test_many_threads_each_get_their_own_replies(pair: tuple[Bus, Bus, GatedService]) -> None:
    _, client, _ = pair

    def calls(t: int) -> list[str]:
        return [
            client.transport.call("gated", ECHO, {"text": f"{t}-{i}"}, timeout_s=10)["text"]
            for i in range(40)
        ]

    with ThreadPoolExecutor(6) as pool:
        results = list(pool.map(calls, range(6)))
    assert results == [[f"{t}-{i}" for i in range(40)] for t in range(6)]


def test_pipelined_replies_are_read_by_whoever_waits(pair: tuple[Bus, Bus, GatedService]) -> None:
    _, client, _ = pair
    results = [
        client.transport.call_nowait("gated", ECHO, {"text": f"p{i}"}, timeout_s=10) for i in range(100)
    ]
    assert [r()["text"] for r in reversed(results)] == [f"p{i}" for i in reversed(range(100))]


def test_a_leader_times_out_and_a_failed_request_ends_its_wait(pair: tuple[Bus, Bus, GatedService]) -> None:
    _, client, svc = pair
    gate, _ = svc.gate("hold-timeout")
    with pytest.raises(RequestTimeout):
        client.transport.call("gated", ECHO, {"text": "hold-timeout"}, timeout_s=0.3)
    gate.set()
    gate2, arrived = svc.gate("hold-fail")
    with ThreadPoolExecutor(1) as pool:
        waiting = pool.submit(client.transport.call, "gated", ECHO, {"text": "hold-fail"}, timeout_s=HOLD_S)
        assert arrived.wait(HOLD_S)
        assert client.fail_pending("gated", Unavailable("peer gone")) == 1
        with pytest.raises(Unavailable, match="peer gone"):
            waiting.result(HOLD_S)
    gate2.set()
    assert client.transport.call("gated", ECHO, {"text": "after"}, timeout_s=10)["text"] == "after"


def test_a_stopped_bus_ends_a_leaders_wait(tmp_path: Path) -> None:
    home = GeodeHome(tmp_path / "h").ensure()
    server, client, svc = Bus("ssrv", 1, home).start(), Bus("scli", 1, home).start(), GatedService()
    server.serve("gated", svc, concurrency=2)
    gate, arrived = svc.gate("hold-stop")
    try:
        with ThreadPoolExecutor(1) as pool:
            waiting = pool.submit(
                client.transport.call, "gated", ECHO, {"text": "hold-stop"}, timeout_s=HOLD_S
            )
            assert arrived.wait(HOLD_S)
            client.stop()
            with pytest.raises(Unavailable):
                waiting.result(HOLD_S)
    finally:
        gate.set()
        client.stop()
        server.stop()
