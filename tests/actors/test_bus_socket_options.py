"""pyzmq's option lookup without its Enum call (actors/bus/socket_options.py): the same answers, no Python
frame per ``Socket.get`` / ``Socket.set`` (the bus asks ``ZMQ_EVENTS`` after each frame it reads or sends)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from types import FrameType

import pytest
import zmq
from zmq.constants import SocketOption

from actors.bus import shared_socket, socket_options


@pytest.fixture
def sock() -> Iterator[zmq.Socket]:  # type: ignore[type-arg]
    ctx = zmq.Context()
    s = ctx.socket(zmq.DEALER)
    s.bind("inproc://socket-options")
    yield s
    s.close(0)
    ctx.term()


def test_the_bus_installs_the_table() -> None:
    assert shared_socket.EVENTS == zmq.EVENTS  # (the bus's sockets module imports it)
    assert socket_options.INSTALLED
    assert socket_options.install()  # a second install finds it in place


def test_every_option_maps_to_the_member_the_enum_gives() -> None:
    from zmq.backend.cython import _zmq

    lookup = _zmq.SocketOption
    assert lookup is not SocketOption
    for name, member in SocketOption.__members__.items():
        assert lookup(member.value) is SocketOption(member.value) is member, name
        assert lookup(member) is member, name
    with pytest.raises(ValueError):
        lookup(99_999)  # what SocketOption(99_999) raises: the backend then lets libzmq refuse it


def test_get_and_set_make_no_python_call(sock: zmq.Socket) -> None:  # type: ignore[type-arg]
    calls: list[str] = []

    def prof(frame: FrameType, event: str, arg: object) -> None:
        if event == "call":
            calls.append(frame.f_code.co_qualname)

    sys.setprofile(prof)
    try:
        events = sock.get(shared_socket.EVENTS)
        sock.set(zmq.LINGER, 7)
        linger = sock.get(zmq.LINGER)
        fd = sock.get(zmq.FD)
    finally:
        sys.setprofile(None)
    assert calls == []  # before: EnumType.__call__ and Enum.__new__ per get / set
    assert events & zmq.POLLOUT == 0  # nothing connected: nothing to send to
    assert linger == 7 and fd > 0
    assert sock.get(zmq.ROUTING_ID) == b""  # a bytes option still read as bytes


def test_an_unknown_option_is_still_refused_by_libzmq(sock: zmq.Socket) -> None:  # type: ignore[type-arg]
    with pytest.raises(zmq.ZMQError) as err:
        sock.get(99_999)
    assert err.value.errno == zmq.EINVAL
