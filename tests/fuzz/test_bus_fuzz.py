"""Fuzz a real Bus endpoint with raw multipart frames from a ZeroMQ DEALER (and a bus client with pushes
from a fake ROUTER): the bus thread lives, every routable request is answered, the rest is one log line."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgpack
import pytest
import zmq
from hypothesis import example, given
from hypothesis import strategies as st

from actors.bus import Bus
from geode.home import GeodeHome
from geode.protocol import codec
from geode.protocol import runtime as rt
from geode.protocol.dispatch import Dispatch
from geode.protocol.errors import BadRequest
from geode.protocol.transport import Request
from tests.fuzz.budget import fuzz, logged, values
from tests.waiting import poll_for

ENDPOINT = "fuzzsvc"


def _pong(b: rt.Ping, r: Request) -> rt.Pong:
    return rt.Pong(name="fuzz", incarnation=1, pid=os.getpid())


def _pack(obj: Any) -> bytes:
    return msgpack.packb(obj, use_bin_type=True)


GOOD = {"v": 1, "id": "g1", "kind": "request", "type": rt.PING, "from": "fz#1", "body": {}}
keys = st.sampled_from(["v", "id", "kind", "type", "corr", "from", "session", "deadline", "body", "x"])
envelope_maps = st.fixed_dictionaries(
    {},
    optional={
        "v": st.sampled_from([1, 1, 2, "1"]) | values,
        "id": st.text(min_size=1, max_size=70) | values,
        "kind": st.sampled_from(["request", "cast", "ok", "error", "shout"]),
        "type": st.sampled_from([rt.PING, rt.STATUS, rt.CHILD_DIED, "store.stats", "a.b", "No Type"])
        | st.from_regex(r"\A[a-z][a-z0-9_]{0,6}(\.[a-z0-9_]{1,6}){0,2}\Z"),
        "corr": st.none() | st.text(max_size=70),
        "from": st.text(max_size=130),
        "deadline": st.none() | st.integers(0, 2**63) | values,
        "body": st.dictionaries(st.text(max_size=8), values, max_size=4) | values,
    },
) | st.dictionaries(keys, values, max_size=6)
last_frames = st.one_of(
    st.binary(max_size=200),
    envelope_maps.map(_pack),
    envelope_maps.map(_pack).flatmap(lambda b: st.integers(0, max(0, len(b) - 1)).map(lambda n: b[:n])),
    values.map(_pack),
    st.just(b"\x80" + b"\x00" * codec.MAX_FRAME_BYTES),  # past the codec cap, under libzmq's
    st.integers(1, 3000).map(lambda n: b"\x91" * n + b"\x00"),  # nesting
)
messages = st.tuples(st.lists(st.binary(max_size=12), max_size=3), last_frames).map(lambda t: [*t[0], t[1]])


def _expects_reply(frame: bytes, nested: bool = False) -> int:
    """The bus answers a frame it cannot decode (bad_request) and every request; casts and replies are not.
    A batch frame (an array of packed envelopes, docs/protocol.md) is answered part by part; a malformed one
    (or one inside a batch) once."""
    if frame[:1] in codec.BATCH_HEADS:
        if nested:
            return 1
        try:
            return sum(_expects_reply(part, True) for part in codec.split_batch(frame))
        except BadRequest:
            return 1
    try:
        env = codec.decode(frame)
    except BadRequest:
        return 1
    return int(env.kind == "request" and env.type != rt.HELLO)


def _envelopes(message: list[bytes]) -> list[bytes]:
    """The envelopes of a received message: its last frame, or the parts of a batch frame."""
    frame = message[-1]
    return codec.split_batch(frame) if frame[:1] in codec.BATCH_HEADS else [frame]


@dataclass
class Rig:
    bus: Bus
    dealer: zmq.Socket  # type: ignore[type-arg]

    def ping_ok(self) -> bool:
        self.dealer.send(_pack(GOOD))
        if not self.dealer.poll(5000):
            return False
        reply = codec.decode(self.dealer.recv_multipart()[-1])
        return reply.kind == "ok" and reply.corr == "g1"


@pytest.fixture(scope="module")
def rig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Rig]:
    home = GeodeHome(Path(tmp_path_factory.mktemp("bus-fuzz")) / "h").ensure()
    bus = Bus("fuzzd", 1, home).start()
    bus.serve(ENDPOINT, Dispatch("fuzz", {rt.PING: _pong}), concurrency=2)
    ctx = zmq.Context()
    dealer = ctx.socket(zmq.DEALER)
    dealer.setsockopt(zmq.LINGER, 0)
    dealer.connect(bus.endpoints.address(ENDPOINT))
    try:
        yield Rig(bus, dealer)
    finally:
        dealer.close(0)
        ctx.term()
        bus.stop()


@fuzz(120, shrink=False)
@given(batch=st.lists(messages, min_size=1, max_size=6))
@example(batch=[[b""], [b"\xc1"], [b"a", b"b", _pack({**GOOD, "kind": "shout"})], [_pack([1, 2])]])
def test_bus_answers_what_it_can_route_and_lives(rig: Rig, batch: list[list[bytes]]) -> None:
    want = 0
    for parts in batch:
        rig.dealer.send_multipart(parts)
        want += _expects_reply(parts[-1])
    got: list[bytes] = []
    deadline = time.monotonic() + 10
    while len(got) < want and time.monotonic() < deadline:
        if rig.dealer.poll(100):
            got += _envelopes(rig.dealer.recv_multipart())
    assert len(got) == want, f"{len(got)} replies to {want} routable requests"
    for reply in got:
        env = codec.decode(reply)
        assert env.kind in ("ok", "error")
        assert env.kind == "ok" or env.body.get("code") in ("bad_request", "timeout"), env.body
    assert rig.bus._thread is not None and rig.bus._thread.is_alive()
    assert rig.ping_ok()


pushes = st.lists(last_frames, min_size=1, max_size=5)


@fuzz(40, shrink=False)
@given(batch=pushes)
def test_a_bus_client_drops_garbled_pushes_with_one_line_each(
    tmp_path_factory: Any, batch: list[bytes]
) -> None:
    """A fake ``lanes`` ROUTER pushes garbage to a bus client (connect_peer): each is dropped or answered,
    a frame that cannot be decoded is one warning line, and the client's bus still makes requests."""
    home = GeodeHome(Path(tmp_path_factory.mktemp("bus-peer")) / "h").ensure()
    server = Bus("fakelanes", 1, home).start()
    server.serve("lanes", Dispatch("fake lanes", {rt.PING: _pong}))
    peer = Bus("peer", 1, home, hello_interval_s=0.05).start()
    try:
        peer.connect_peer("lanes", _ignore)
        poll_for(lambda: server.peers("lanes"), 5, what="the client's hello")
        served = server._served["lanes"]
        rid = served.peers["peer"]
        bad = sum(1 for f in batch if not _decodes(f))
        with logged("actors.bus") as lines:
            for f in batch:  # sent by this thread, on the ROUTER under its lock, before the ping below
                _push(server, served.sock, [rid, f])
            # the peer's reply to its own ping comes after every push (one DEALER, in order)
            reply = peer.transport.call("lanes", rt.PING, {}, timeout_s=5)
        assert reply["name"] == "fuzz"
        dropped = [r for r in lines.records if "malformed frame" in r.getMessage()]
        assert len(dropped) == bad and all("\n" not in r.getMessage() for r in dropped)
        assert peer._thread is not None and peer._thread.is_alive()
    finally:
        peer.stop()
        server.stop()


def _ignore(r: Request) -> None:
    return None


def _push(bus: Bus, sock: Any, frames: list[bytes]) -> None:
    bus._send_raw(sock, frames)


def _decodes(frame: bytes) -> bool:
    try:
        codec.decode(frame)
    except BadRequest:
        return False
    return True
