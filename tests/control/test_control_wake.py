"""The control socket's thread is woken once per sleep, not once per frame sent to a client (issue 34,
FRAMES): frames queued while it is busy go out on its next pass, in order, with no eventfd write each."""

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


class HeldCore:
    """A core whose first frame holds the socket thread until the test lets it go."""

    def __init__(self) -> None:
        self.conn: list[str] = []
        self.entered = threading.Event()
        self.release = threading.Event()

    def on_frame(self, conn_id: str, frame: bytes) -> None:
        self.conn.append(conn_id)
        self.entered.set()
        assert self.release.wait(30)

    def disconnect(self, conn_id: str) -> None:
        pass


@pytest.fixture
def held(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[ControlSocket, HeldCore, list[int], zmq.Socket]]:  # type: ignore[type-arg]
    root = Path(tempfile.mkdtemp(prefix="geode-wake-"))
    s = ControlSocket(GeodeHome(root))
    core = HeldCore()
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
        core.release.set()
        d.close(0)
        ctx.term()
        s.stop()
        shutil.rmtree(root, ignore_errors=True)


def _recv(d: zmq.Socket) -> Envelope:  # type: ignore[type-arg]
    assert d.poll(10_000), "no frame from the control socket"
    return codec.decode(d.recv())


def test_frames_sent_while_the_socket_thread_is_busy_cost_no_wake_and_all_arrive_in_order(
    held: tuple[ControlSocket, HeldCore, list[int], zmq.Socket],  # type: ignore[type-arg]
) -> None:
    s, core, writes, d = held
    d.send(codec.encode(Envelope(type="cli.ping", body={})))
    assert core.entered.wait(10)  # the socket thread is inside on_frame: busy, not asleep in poll
    for i in range(50):
        s.send(core.conn[0], Envelope(type="cli.event", body={"seq": i}))
    assert writes == []  # the old code wrote the eventfd once per frame: 50
    core.release.set()
    assert [_recv(d).body["seq"] for _ in range(50)] == list(range(50))


def test_a_frame_sent_to_an_idle_socket_thread_is_sent_with_at_most_one_wake(
    held: tuple[ControlSocket, HeldCore, list[int], zmq.Socket],  # type: ignore[type-arg]
) -> None:
    s, core, writes, d = held
    core.release.set()
    d.send(codec.encode(Envelope(type="cli.ping", body={})))
    assert core.entered.wait(10)
    poll_for(lambda: s._idle, 10.0, what="the socket thread asleep in poll")
    s.send(core.conn[0], Envelope(type="cli.event", body={"seq": 1}))
    assert _recv(d).body == {"seq": 1}
    assert len(writes) <= 1  # one wake (none if its 500 ms poll timeout ran out just then)
