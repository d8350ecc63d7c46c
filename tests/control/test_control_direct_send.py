"""A frame to a client is sent by the thread that makes it, not handed to the control socket's thread (issue
34 session 4, RELAY): the bus thread relaying a turn's events wakes nobody, and the client frames that arrive
while other threads send are all read."""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import zmq

from actors.control import ControlSocket
from geode.home import GeodeHome
from geode.protocol import codec
from geode.protocol.envelope import Envelope
from tests.waiting import poll_for


class CountingCore:
    def __init__(self) -> None:
        self.conn: list[str] = []
        self.frames = 0
        self.disconnected: list[str] = []

    def on_frame(self, conn_id: str, frame: bytes) -> None:
        if not self.conn:
            self.conn.append(conn_id)
        self.frames += 1

    def disconnect(self, conn_id: str) -> None:
        self.disconnected.append(conn_id)


@pytest.fixture
def wired(
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[tuple[ControlSocket, CountingCore, list[int], zmq.Socket]]:  # type: ignore[type-arg]
    root = Path(tempfile.mkdtemp(prefix="geode-direct-"))
    s = ControlSocket(GeodeHome(root))
    core = CountingCore()
    writes: list[int] = []
    real = os.eventfd_write

    def counted(fd: int, value: int) -> None:
        if fd == s._wake:
            writes.append(value)
        real(fd, value)

    monkeypatch.setattr(os, "eventfd_write", counted)
    s.start(core)  # type: ignore[arg-type]
    ctx = zmq.Context()
    d = ctx.socket(zmq.DEALER)
    d.setsockopt(zmq.LINGER, 0)
    d.connect(f"ipc://{s.path}")
    try:
        yield s, core, writes, d
    finally:
        d.close(0)
        ctx.term()
        s.stop()
        shutil.rmtree(root, ignore_errors=True)


def _recv(d: zmq.Socket) -> Envelope:  # type: ignore[type-arg]
    assert d.poll(10_000), "no frame from the control socket"
    return codec.decode(d.recv())


def test_frames_sent_to_an_idle_socket_thread_wake_it_never(
    wired: tuple[ControlSocket, CountingCore, list[int], zmq.Socket],  # type: ignore[type-arg]
) -> None:
    s, core, writes, d = wired
    d.send(codec.encode(Envelope(type="cli.ping", body={})))
    poll_for(lambda: core.conn, 10.0, what="the client's first frame")
    for i in range(20):  # each sent while the socket thread sleeps in poll (the old code woke it for each)
        poll_for(lambda: s._idle, 10.0, what="the socket thread asleep in poll")
        s.send(core.conn[0], Envelope(type="cli.event", body={"seq": i}))
        assert _recv(d).body == {"seq": i}
    assert writes == []


def test_client_frames_arriving_while_other_threads_send_are_all_read(
    wired: tuple[ControlSocket, CountingCore, list[int], zmq.Socket],  # type: ignore[type-arg]
) -> None:
    s, core, _writes, d = wired
    d.send(codec.encode(Envelope(type="cli.ping", body={})))
    poll_for(lambda: core.conn, 10.0, what="the client's first frame")
    conn = core.conn[0]

    def flood(start: int) -> None:
        for i in range(start, start + 300):
            s.send(conn, Envelope(type="cli.event", body={"seq": i}))

    senders = [threading.Thread(target=flood, args=(n * 1000,)) for n in range(2)]
    for t in senders:
        t.start()
    for _ in range(200):  # the reader must see every one, whichever thread's send took the ZMQ_FD edge
        d.send(codec.encode(Envelope(type="cli.ping", body={})))
    got: list[int] = [_recv(d).body["seq"] for _ in range(600)]
    for t in senders:
        t.join(10)
    for n in range(2):  # each sender's frames arrive in its order
        assert [x for x in got if n * 1000 <= x < n * 1000 + 300] == list(range(n * 1000, n * 1000 + 300))
    poll_for(lambda: core.frames == 201, 10.0, what="every client frame read")
    assert core.disconnected == []


def test_events_over_the_frame_cap_together_go_one_to_a_frame(
    wired: tuple[ControlSocket, CountingCore, list[int], zmq.Socket],  # type: ignore[type-arg]
) -> None:
    """A turn's end and its done in one ``cli.events`` (a long answer): over the 1 MiB cap together, each one
    alone as a ``cli.event`` (the old code sent an ``internal`` error frame in their place)."""
    s, core, _writes, d = wired
    d.send(codec.encode(Envelope(type="cli.ping", body={})))
    poll_for(lambda: core.conn, 10.0, what="the client's first frame")
    big = "x" * (codec.MAX_FRAME_BYTES * 6 // 10)
    events = [
        {"session_id": "s", "turn_id": "t", "seq": 1, "kind": "termination", "data": {"note": big}},
        {"session_id": "s", "turn_id": "t", "seq": 2, "kind": "turn_done", "data": {"text": big}},
    ]
    s.send(core.conn[0], Envelope(kind="cast", type="cli.events", body={"events": events}))
    got = [_recv(d), _recv(d)]
    assert [(f.type, f.body["seq"]) for f in got] == [("cli.event", 1), ("cli.event", 2)]
