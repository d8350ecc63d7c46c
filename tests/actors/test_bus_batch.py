"""Batch frames (docs/protocol.md, "Batched frames"): the replies the bus thread sends while it reads a burst
go to each peer as one ZeroMQ message; a batch received is split and each part validated and answered on its
own (a malformed part gets its own bad_request); a malformed batch gets one.

Deterministic: the server's bus thread is parked on an op while the requests are queued (inproc: each is in
the socket's pipe when its send returns), so it finds them all waiting when it reads."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgpack
import pytest
import zmq

from actors.bus import Bus
from geode.home import GeodeHome
from geode.protocol import codec
from geode.protocol.envelope import Envelope
from geode.protocol.transport import Request
from tests.actors.bus_fixtures import ECHO

N = 10


class InlineEcho:
    inline_types = frozenset({ECHO})

    def handle(self, request: Request) -> dict[str, Any]:
        return {"text": request.body.text}  # type: ignore[attr-defined]


def _request(mid: str, body: dict[str, Any]) -> bytes:
    env = Envelope(kind="request", type=ECHO, id=mid, body=body, **{"from": "raw#1"})
    return codec.encode(env)


@pytest.fixture
def rig(tmp_path: Path) -> Iterator[tuple[Bus, zmq.Socket]]:  # type: ignore[type-arg]
    home = GeodeHome(tmp_path / "h").ensure()
    server = Bus("srv", 1, home, single_process=True).start()
    server.serve("batched", InlineEcho())
    dealer = zmq.Context.instance().socket(zmq.DEALER)
    dealer.setsockopt(zmq.LINGER, 0)
    dealer.connect(server.endpoints.address("batched"))
    try:
        yield server, dealer
    finally:
        dealer.close(0)
        server.stop()


def _parked(server: Bus) -> threading.Event:
    """Park the server's bus thread on an op until the returned event is set."""
    go, parked = threading.Event(), threading.Event()

    def park() -> None:
        parked.set()
        go.wait(10)

    server._post(park)
    assert parked.wait(5)
    return go


def _replies(dealer: zmq.Socket, want: int) -> tuple[list[Envelope], int]:  # type: ignore[type-arg]
    """``want`` reply envelopes (a batch frame split) and how many ZeroMQ messages carried them."""
    got: list[Envelope] = []
    messages = 0
    while len(got) < want:
        assert dealer.poll(5000), f"{len(got)} of {want} replies"
        frame = dealer.recv_multipart()[-1]
        messages += 1
        parts = codec.split_batch(frame) if frame[:1] in codec.BATCH_HEADS else [frame]
        got += [codec.decode(p) for p in parts]
    return got, messages


def test_a_burst_is_answered_in_one_batch_frame(rig: tuple[Bus, zmq.Socket]) -> None:  # type: ignore[type-arg]
    server, dealer = rig
    go = _parked(server)
    for i in range(N):
        dealer.send(_request(f"m{i}", {"text": f"t{i}"}))
    go.set()
    got, messages = _replies(dealer, N)
    # the first frame's reply goes at once (a lone frame is never held); the 9 waiting after it, together
    assert messages == 2, messages
    assert [e.corr for e in got] == [f"m{i}" for i in range(N)]  # the peer's order kept
    assert all(e.kind == "ok" and e.body == {"text": f"t{i}"} for i, e in enumerate(got))
    assert not dealer.poll(50)


def test_one_in_flight_is_never_batched(rig: tuple[Bus, zmq.Socket]) -> None:  # type: ignore[type-arg]
    _, dealer = rig
    for i in range(5):
        dealer.send(_request(f"s{i}", {"text": "x"}))
        frame = (dealer.recv_multipart() if dealer.poll(5000) else [b""])[-1]
        assert codec.decode(frame).corr == f"s{i}"  # a plain envelope frame, not a batch


def test_each_part_of_a_batch_is_validated_and_answered(rig: tuple[Bus, zmq.Socket]) -> None:  # type: ignore[type-arg]
    _, dealer = rig
    parts = [
        _request("a", {"text": "one"}),
        b"\xc1",  # not msgpack: its own bad_request (no id to answer)
        _request("b", {"text": 3}),  # a body its model refuses: bad_request to b
        codec.encode_batch([_request("n", {"text": "x"})]),  # a batch in a batch: refused
        _request("c", {"text": "three"}),
    ]
    dealer.send(codec.encode_batch(parts))
    got, _ = _replies(dealer, 5)
    ok = {e.corr: e.body for e in got if e.kind == "ok"}
    assert ok == {"a": {"text": "one"}, "c": {"text": "three"}}
    bad = [e for e in got if e.kind == "error"]
    assert all(e.body["code"] == "bad_request" for e in bad) and len(bad) == 3
    assert sorted(str(e.corr) for e in bad) == ["None", "None", "b"]


@pytest.mark.parametrize("frame", [msgpack.packb([1, 2]), msgpack.packb([]), b"\x92\xc4\x05ab"])
def test_a_malformed_batch_gets_one_bad_request(rig: tuple[Bus, zmq.Socket], frame: bytes) -> None:  # type: ignore[type-arg]
    _, dealer = rig
    dealer.send(frame)
    got, _ = _replies(dealer, 1)
    assert got[0].kind == "error" and got[0].body["code"] == "bad_request"
    assert not dealer.poll(50)


def test_a_bus_client_takes_batched_replies(tmp_path: Path) -> None:
    home = GeodeHome(tmp_path / "h").ensure()
    server = Bus("srv", 1, home, single_process=True).start()
    client = Bus("cli", 1, home, single_process=True).start()
    try:
        server.serve("batched", InlineEcho())
        tr = client.transport
        assert tr.call("batched", ECHO, {"text": "warm"}, timeout_s=5) == {"text": "warm"}
        go = _parked(server)
        waits = [tr.call_nowait("batched", ECHO, {"text": f"p{i}"}, timeout_s=5) for i in range(N)]
        go.set()
        assert [w() for w in waits] == [{"text": f"p{i}"} for i in range(N)]
    finally:
        client.stop()
        server.stop()
