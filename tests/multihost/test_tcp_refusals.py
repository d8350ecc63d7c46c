"""A stranger refused by CURVE is noise an operator reads once a minute, never a traceback: the accepted fd's
address is read only when it still is that tcp connection (libzmq may have closed it and the number may be an
ipc socket's by then), and each host is logged one line a minute (an injected clock), ZAP refusals too."""

from __future__ import annotations

import logging
import socket
import threading
from pathlib import Path

import pytest
import zmq

from actors.bus import Bus, host_keys
from actors.bus.endpoints import CurveKeys, Endpoints
from actors.bus.settings import BusSection
from actors.bus.tcp_refusals import GONE, HandshakeWatch, PeerLogGate, peer_of
from geode.home import GeodeHome
from geode.protocol import codec, runtime
from geode.protocol.envelope import Envelope
from tests.actors.bus_fixtures import FixtureService
from tests.multihost.ports import free_base_port
from tests.multihost.refused_send import send_unless_refused
from tests.waiting import poll_for


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_peer_of_gives_no_address_for_an_fd_that_is_not_this_peer_any_more() -> None:
    a, b = socket.socketpair()  # what a reused fd number may be by the time the monitor event is read
    with a, b:
        assert peer_of(a.fileno()) == GONE
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        with socket.create_connection(("127.0.0.1", port)) as client:
            served, _ = listener.accept()
            with served:
                assert peer_of(served.fileno(), port) == f"127.0.0.1:{client.getsockname()[1]}"
                # a tcp socket, but not one this listener accepted
                assert peer_of(client.fileno(), port) == GONE
    gone = socket.socket()
    fd = gone.fileno()
    gone.close()
    assert peer_of(fd) == GONE


def test_the_gate_admits_one_line_a_minute_per_host_with_the_count_since() -> None:
    clock = Clock()
    gate = PeerLogGate(60.0, clock)
    assert gate.admit("10.0.0.9") == (True, 0)
    assert [gate.admit("10.0.0.9") for _ in range(3)] == [(False, 0)] * 3
    assert gate.admit("10.0.0.7") == (True, 0)  # another host has its own minute
    clock.now += 59.9
    assert gate.admit("10.0.0.9") == (False, 0)
    clock.now += 0.2
    assert gate.admit("10.0.0.9") == (True, 4)


def test_a_stranger_reconnecting_for_minutes_is_one_line_a_minute(caplog: pytest.LogCaptureFixture) -> None:
    """The watch's own logic with its clock injected: 240 refusals in four (fake) minutes, on an fd number
    that is an ipc socket by the time it is read (the traceback of issue 27), give four lines, no error."""
    ctx = zmq.Context()
    router = ctx.socket(zmq.ROUTER)
    clock = Clock()
    watch = HandshakeWatch(router, "tcp://127.0.0.1:7700", clock=clock)
    a, b = socket.socketpair()
    try:
        with caplog.at_level(logging.WARNING, logger="actors.bus.tcp_refusals"):
            for _ in range(240):  # one every second (a reconnecting peer tries every 0.1-0.5 s)
                watch._on(zmq.EVENT_ACCEPTED, a.fileno())
                watch._on(zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL, zmq.PROTOCOL_ERROR_ZMTP_CRYPTOGRAPHIC)
                watch._on(zmq.EVENT_DISCONNECTED, a.fileno())
                clock.now += 1.0
        lines = [r.getMessage() for r in caplog.records]
        assert watch.refused == 240
        assert len(lines) == 4, lines
        assert all(f"refused a tcp peer from {GONE} on tcp://127.0.0.1:7700" in line for line in lines)
        assert "(59 more since the last line)" in lines[1]
    finally:
        a.close()
        b.close()
        watch.close()
        router.close(0)
        ctx.term()


def _refused_attempts(monitor: zmq.Socket, at_least: int, timeout_s: float) -> int:  # type: ignore[type-arg]
    """Wait (on the stranger's own monitor) until libzmq dropped ``at_least`` of its connections."""
    from zmq.utils.monitor import recv_monitor_message

    seen = 0
    poller = zmq.Poller()
    poller.register(monitor, zmq.POLLIN)
    while seen < at_least:
        assert poller.poll(int(timeout_s * 1000)), f"only {seen} refused connections in {timeout_s} s"
        if recv_monitor_message(monitor)["event"] == zmq.EVENT_DISCONNECTED:
            seen += 1
    return seen


def test_a_real_stranger_makes_no_traceback_and_one_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A wrong-server-key peer refused again and again at a real CURVE listener, while the bus thread is busy
    and the process opens unix sockets meanwhile (a busy lanes' ipc peers): by the time the monitor events are
    read, the accepted fd numbers are unix sockets. No "socket handler failed", one line for the host."""
    main = GeodeHome(tmp_path / "m").ensure()
    host_keys.create(main)
    port = free_base_port()
    cfg = BusSection.model_validate({"listen": f"tcp://127.0.0.1:{port}"})
    served = Bus("lanes", 1, main, endpoints=Endpoints.from_config(main, bus=cfg)).start()
    ctx = zmq.Context()
    wrong = ctx.socket(zmq.DEALER)
    wrong.curve_serverkey = CurveKeys.generate().public  # not main's key: refused before ZAP
    wrong.curve_publickey, wrong.curve_secretkey = zmq.curve_keypair()
    wrong.setsockopt(zmq.LINGER, 0)
    wrong.setsockopt(zmq.RECONNECT_IVL, 20)
    monitor = wrong.get_monitor_socket(zmq.EVENT_DISCONNECTED)
    busy, held = threading.Event(), []
    try:
        with caplog.at_level(logging.WARNING):
            served.serve("lanes", FixtureService("lanes", 1))
            watch = served._watches[0]
            served._post(lambda: busy.wait(30))  # the bus thread reads no monitor event until released
            wrong.connect(f"tcp://127.0.0.2:0;127.0.0.1:{port}")
            send_unless_refused(wrong, codec.encode(Envelope(type=runtime.PING, **{"from": "x#1"})))
            attempts = _refused_attempts(monitor, 8, 20)
            wrong.disconnect(f"tcp://127.0.0.2:0;127.0.0.1:{port}")
            for _ in range(64):  # the freed fd numbers (the lowest free) become unix sockets
                held += socket.socketpair()
            busy.set()
            poll_for(lambda: watch.refused >= attempts, 20, what="the refusals read by the bus thread")
        failed = [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info]
        assert not failed, [r.getMessage() for r in failed]
        lines = [r.getMessage() for r in caplog.records if "refused a tcp peer" in r.getMessage()]
        hosts = [line.split(" from ", 1)[1].split(" on ", 1)[0].rsplit(":", 1)[0] for line in lines]
        assert len(hosts) == len(set(hosts)) and set(hosts) <= {"127.0.0.2", GONE}, lines
        assert not any(f"from 127.0.0.1:{port} " in line for line in lines), lines  # never its own address
    finally:
        busy.set()
        for s in held:
            s.close()
        monitor.close(0)
        wrong.close(0)
        ctx.term()
        served.stop()
