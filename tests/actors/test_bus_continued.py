"""Requests completed by a callback (actors/bus/continued.py): no thread waits for the reply."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from actors.bus import Bus
from actors.bus.continued import ContinuedCalls, ContinuedReply
from actors.bus.parts import PendingReply
from geode.home import GeodeHome
from geode.protocol.envelope import Envelope
from geode.protocol.errors import Conflict, GeodeError, RequestTimeout, Unavailable
from geode.protocol.later import Later
from geode.protocol.transport import Request
from tests.actors.bus_fixtures import BOOM, ECHO
from tests.waiting import poll_for


class Answers:
    """``test.echo`` answers at once (or never, when ``hold``); ``test.boom`` fails with a conflict."""

    inline_types = frozenset({ECHO, BOOM})

    def __init__(self) -> None:
        self.hold = False
        self.held: list[Later] = []

    def handle(self, request: Request) -> Any:
        if request.type == BOOM:
            raise Conflict("already stored")
        if self.hold:
            later = Later()
            self.held.append(later)
            return later
        return {"text": request.body.text}  # type: ignore[attr-defined]


@pytest.fixture
def buses(tmp_path: Path) -> Iterator[tuple[Bus, Bus, Answers]]:
    home = GeodeHome(tmp_path / "h").ensure()
    server = Bus("srv", 1, home, single_process=True).start()
    client = Bus("cli", 1, home, single_process=True).start()
    svc = Answers()
    server.serve("cont", svc)
    try:
        yield server, client, svc
    finally:
        client.stop(timeout_s=15.0)
        server.stop(timeout_s=15.0)


class Outcomes:
    def __init__(self) -> None:
        self.got: list[tuple[Any, str]] = []
        self.cv = threading.Condition()

    def __call__(self, out: Any) -> None:
        with self.cv:
            self.got.append((out, threading.current_thread().name))

    def wait(self, n: int) -> list[tuple[Any, str]]:
        poll_for(lambda: len(self.got) >= n, 10, what=f"{n} outcomes")
        return self.got


def test_replies_go_to_the_callback_on_the_bus_thread_and_blocking_calls_still_work(
    buses: tuple[Bus, Bus, Answers],
) -> None:
    _server, client, _svc = buses
    calls = ContinuedCalls(client)
    calls.bus_reads("cont")
    outs = Outcomes()
    for i in range(20):
        calls.call("cont", ECHO, {"text": f"m{i}"}, outs, timeout_s=10)
    got = outs.wait(20)
    assert sorted(o["text"] for o, _ in got) == sorted(f"m{i}" for i in range(20))
    assert {t for _, t in got} == {"bus-cli"}  # no thread of ours waited: the bus thread handed them over
    assert calls.inflight() == 0 and not client._pending
    assert client.transport.call("cont", ECHO, {"text": "blocking"}, timeout_s=10)["text"] == "blocking"


def test_an_error_reply_is_the_typed_error(buses: tuple[Bus, Bus, Answers]) -> None:
    _server, client, _svc = buses
    calls = ContinuedCalls(client)
    calls.bus_reads("cont")
    outs = Outcomes()
    calls.call("cont", BOOM, {}, outs, timeout_s=10)
    out, _ = outs.wait(1)[0]
    assert isinstance(out, Conflict) and "already stored" in out.message
    calls.call("cont", "test.nosuch", {}, outs, timeout_s=10)
    out, _ = outs.wait(2)[1]
    assert isinstance(out, GeodeError)  # (an unknown type: the server refuses it, typed)


def test_an_unanswered_request_times_out_once_and_its_late_reply_is_dropped(
    buses: tuple[Bus, Bus, Answers],
) -> None:
    _server, client, svc = buses
    calls = ContinuedCalls(client)
    calls.bus_reads("cont")
    outs = Outcomes()
    svc.hold = True
    calls.call("cont", ECHO, {"text": "lost"}, outs, timeout_s=0.2)
    poll_for(lambda: svc.held, 5, what="the request to be held")
    assert calls.sweep() == 0  # not due yet
    poll_for(lambda: calls.sweep() == 1, 5, what="the request to time out")
    out, _ = outs.wait(1)[0]
    assert isinstance(out, RequestTimeout)
    svc.held[0].resolve({"text": "late"})  # answered after its deadline: nothing more is called
    svc.hold = False
    calls.call("cont", ECHO, {"text": "next"}, outs, timeout_s=10)
    got = outs.wait(2)
    assert len(got) == 2 and got[1][0] == {"text": "next"}
    assert calls.sweep() == 0 and calls.inflight() == 0


def test_requests_in_flight_when_the_bus_stops_are_failed_and_a_stopped_bus_refuses(
    buses: tuple[Bus, Bus, Answers],
) -> None:
    _server, client, svc = buses
    calls = ContinuedCalls(client)
    calls.bus_reads("cont")
    outs = Outcomes()
    svc.hold = True
    calls.call("cont", ECHO, {"text": "stuck"}, outs, timeout_s=30)
    poll_for(lambda: svc.held, 5, what="the request to be held")
    client.stop(timeout_s=15.0)
    out, _ = outs.wait(1)[0]
    assert isinstance(out, Unavailable)
    with pytest.raises(Unavailable):
        calls.call("cont", ECHO, {"text": "after"}, outs, timeout_s=1)
    assert len(outs.got) == 1


def test_the_bus_thread_runs_a_continuation_as_it_reads_the_reply_and_wakes_a_waiter_at_its_pass_end(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """STOREREPLY s10: a continued request's reply is handed on as the bus thread reads it, not at the end of
    its pass with the waiting threads' wakes (it waited there for the rest of the pass: the other sockets'
    frames, posted ops); a failing continuation is logged and the read goes on."""
    bus = Bus("cli", 1, GeodeHome(tmp_path / "h").ensure(), single_process=True)  # not started: no thread
    try:
        outs = Outcomes()
        cont = ContinuedReply("t", ECHO, "m1", outs, lambda: None)
        waiter = PendingReply("t", ECHO)

        def boom(out: Any) -> None:
            raise RuntimeError("boom")

        bus._pending.update(m1=cont, m2=waiter, m3=ContinuedReply("t", ECHO, "m3", boom, lambda: None))
        reply = {"kind": "ok", "type": ECHO, "from": "srv", "body": {"text": "a"}}
        bus._resolve(Envelope.model_validate({**reply, "corr": "m1"}))
        assert outs.got == [({"text": "a"}, threading.current_thread().name)] and not bus._handoffs
        bus._resolve(Envelope.model_validate({**reply, "corr": "m2"}))
        assert not waiter.is_set() and bus._handoffs == [waiter.set]  # woken right before the bus sleeps
        bus._resolve(Envelope.model_validate({**reply, "corr": "m3"}))
        assert "a continuation failed" in caplog.text and not bus._pending
        bus._hand_off()
        assert waiter.is_set()
    finally:
        bus.stop(timeout_s=5.0)
