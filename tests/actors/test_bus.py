"""The bus across real processes: request/reply, timeouts, reconnect, garbage frames, errors, pushes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import msgpack
import pytest
import zmq

from actors.bus import Bus
from actors.bus.endpoints import CurveKeys, Endpoints
from geode.home import GeodeHome
from geode.protocol import codec, runtime
from geode.protocol.envelope import Envelope
from geode.protocol.errors import BadRequest, ConfigError, RemoteError, RequestTimeout
from tests.actors.bus_fixtures import BOOM, BUSY, ECHO, FixtureService
from tests.processes import Child
from tests.waiting import poll_for

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def home(tmp_path: Path) -> GeodeHome:
    return GeodeHome(tmp_path / "h").ensure()


@pytest.fixture
def client(home: GeodeHome) -> Iterator[Bus]:
    bus = Bus("client", 1, home).start()
    yield bus
    bus.stop()


def spawn_peer(home: GeodeHome, name: str, inc: int) -> Child:
    p = Child(
        [sys.executable, "-m", "tests.actors.bus_peer", str(home.root), name, str(inc)],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert p.stdout is not None and p.stdout.readline().strip() == "ready"
    return p


@pytest.fixture
def peer(home: GeodeHome) -> Iterator[Child]:
    p = spawn_peer(home, "peer", 1)
    yield p
    p.kill()
    p.wait()


def ping_until(bus: Bus, target: str, want_inc: int, within_s: float = 10.0) -> dict[str, object]:
    def answered() -> dict[str, object] | None:
        reply: dict[str, object] = bus.transport.call(target, runtime.PING, timeout_s=0.5)
        return reply if reply["incarnation"] == want_inc else None

    return poll_for(
        answered,
        within_s,
        interval_s=0.01,
        what=f"{target} answering as #{want_inc}",
        swallow=(RequestTimeout,),
    )


def test_request_reply_across_processes(client: Bus, peer: Child) -> None:
    reply = client.transport.call("peer", runtime.PING, timeout_s=5)
    assert reply["pid"] == peer.pid and reply["name"] == "peer"
    echoed = client.transport.call("peer", ECHO, {"text": "hi"}, timeout_s=5)
    assert echoed == {"text": "hi", "from": "client#1"}


def test_timeout_when_peer_is_gone(client: Bus, peer: Child) -> None:
    ping_until(client, "peer", 1)
    peer.send_signal(signal.SIGKILL)
    peer.wait()
    t0 = time.monotonic()
    with pytest.raises(RequestTimeout):
        client.transport.call("peer", runtime.PING, timeout_s=0.3)
    assert time.monotonic() - t0 < 1.0


def test_reconnect_after_peer_restarts(home: GeodeHome, client: Bus, peer: Child) -> None:
    ping_until(client, "peer", 1)
    peer.kill()
    peer.wait()
    again = spawn_peer(home, "peer", 2)
    try:
        assert ping_until(client, "peer", 2)["pid"] == again.pid
    finally:
        again.kill()
        again.wait()


def test_garbage_frames_get_bad_request_and_receiver_survives(
    home: GeodeHome, client: Bus, peer: Child
) -> None:
    ping_until(client, "peer", 1)
    ctx = zmq.Context()
    raw = ctx.socket(zmq.DEALER)
    raw.setsockopt(zmq.LINGER, 0)
    raw.connect(home.ipc_endpoint("peer"))
    unknown = Envelope(id="u1", type="no.such.type", **{"from": "raw#1"})
    frames = [
        b"\xc1\xc1not msgpack",
        msgpack.packb([1, 2, 3]),
        msgpack.packb({"v": 1, "id": "x1", "type": "runtime.ping", "kind": "bogus"}),
        b"\x00" * (codec.MAX_FRAME_BYTES + 10),
        codec.encode(unknown),
        codec.encode(Envelope(id="b1", type=ECHO, body={"text": 5}, **{"from": "raw#1"})),
    ]
    try:
        for f in frames:
            raw.send(f)
            assert raw.poll(5000), "no reply to a bad frame"
            reply = codec.decode(raw.recv())
            assert reply.kind == "error" and reply.body["code"] == "bad_request", reply
        assert codec.peek_reply_address(frames[2]) == ("x1", "runtime.ping")
    finally:
        raw.close(0)
        ctx.term()
    assert client.transport.call("peer", runtime.PING, timeout_s=5)["pid"] == peer.pid


def test_handler_exception_is_internal_and_actor_lives(client: Bus, peer: Child) -> None:
    with pytest.raises(RemoteError) as info:
        client.transport.call("peer", BOOM, timeout_s=5)
    assert info.value.code == "internal" and "ZeroDivisionError" in info.value.message
    assert client.transport.call("peer", runtime.PING, timeout_s=5)["pid"] == peer.pid


def test_slow_handler_does_not_block_others(client: Bus, peer: Child) -> None:
    ping_until(client, "peer", 1)
    slow = threading.Thread(
        target=client.transport.call, args=("peer", ECHO, {"delay_s": 1.5}), kwargs={"timeout_s": 5}
    )
    slow.start()
    busy = lambda: client.transport.call("peer", BUSY, timeout_s=5)["busy"]  # noqa: E731
    poll_for(busy, 5, what="the slow echo running in the peer")
    t0 = time.monotonic()
    client.transport.call("peer", runtime.PING, timeout_s=5)
    assert time.monotonic() - t0 < 0.5
    slow.join()


def test_backlog_past_the_bound_is_overloaded(home: GeodeHome) -> None:
    from geode.protocol.errors import Overloaded

    gate, entered = threading.Event(), threading.Event()

    class Gated:
        def handle(self, request: object) -> dict[str, object]:
            if getattr(request, "type", "") == ECHO:
                entered.set()
                gate.wait(10)
            return {"name": "srv"}

    server, client = Bus("srv", 1, home).start(), Bus("cli", 1, home).start()
    try:
        server.serve("srv", Gated(), concurrency=1, max_backlog=2)
        client.transport.call("srv", runtime.PING, timeout_s=5)  # connected
        held = [client.transport.call_nowait("srv", ECHO, {}, timeout_s=10)]
        assert entered.wait(5)  # the only handler is now busy
        held += [client.transport.call_nowait("srv", ECHO, {}, timeout_s=10) for _ in range(2)]
        pool = server._served["srv"].pool
        # 1 held in the handler, 2 queued: the bound is reached
        poll_for(pool.full, 10, interval_s=0.005, what="the handler pool's backlog to be full")
        with pytest.raises(Overloaded):
            client.transport.call("srv", runtime.PING, timeout_s=5)
        gate.set()
        for result in held:
            result()
        assert client.transport.call("srv", runtime.PING, timeout_s=5)["name"] == "srv"
    finally:
        gate.set()
        client.stop()
        server.stop()


def test_oversized_request_refused_at_sender(client: Bus) -> None:
    with pytest.raises(BadRequest):
        client.transport.call("peer", ECHO, {"text": "x" * (codec.MAX_FRAME_BYTES + 1)}, timeout_s=1)


def test_server_pushes_to_connected_peer_by_name(home: GeodeHome) -> None:
    lanes = Bus("lanes", 1, home).start()
    worker = Bus("loop-1", 7, home).start()
    got: list[str] = []
    try:
        lanes.serve("lanes", FixtureService("lanes", 1))
        worker.connect_peer("lanes", lambda req: got.append(req.type) or {"ok": True})
        poll_for(lambda: "loop-1" in lanes.peers("lanes"), 5, what="loop-1 connected to lanes")
        assert lanes.transport.call("loop-1", ECHO, {"text": "run"}, timeout_s=5) == {"ok": True}
        assert lanes.transport.call("loop-1#7", ECHO, {"text": "run"}, timeout_s=5) == {"ok": True}
        # the worker can still call the endpoint it is connected to
        assert worker.transport.call("lanes", ECHO, {"text": "x"}, timeout_s=5)["from"] == "loop-1#7"
        assert got == [ECHO, ECHO]
    finally:
        worker.stop()
        lanes.stop()


def test_a_restarted_server_learns_a_peer_at_its_reconnect_not_at_the_next_hello(home: GeodeHome) -> None:
    """A new lanes can push a queued turn to a worker only once it knows the worker's name: the worker says
    hello when its connection's handshake completes again, not at its next periodic hello (60 s here)."""
    worker = Bus("loop-1", 7, home, hello_interval_s=60).start()
    lanes = Bus("lanes", 1, home).start()
    lanes2: Bus | None = None
    try:
        lanes.serve("lanes", FixtureService("lanes", 1))
        connected = threading.Event()  # a loop worker heartbeats at once from this hook
        worker.connect_peer("lanes", lambda req: {"ok": True}, on_connected=connected.set)
        poll_for(lambda: "loop-1" in lanes.peers("lanes"), 5, what="loop-1 known to lanes#1")
        lanes.stop()
        connected.clear()
        lanes2 = Bus("lanes", 2, home).start()
        lanes2.serve("lanes", FixtureService("lanes", 2))
        poll_for(lambda: "loop-1" in lanes2.peers("lanes"), 5, what="loop-1 known to the restarted lanes")
        assert connected.wait(5), "the owner was not told of the new connection"
        assert lanes2.transport.call("loop-1", ECHO, {"text": "run"}, timeout_s=5) == {"ok": True}
    finally:
        worker.stop()
        lanes.stop()
        if lanes2 is not None:
            lanes2.stop()


def test_casts_and_pubsub(home: GeodeHome) -> None:
    server = Bus("supervisor", 1, home).start()
    sub = Bus("watcher", 1, home).start()
    svc = FixtureService("supervisor", 1)
    events: list[tuple[str, dict[str, object]]] = []
    seen = threading.Event()
    try:
        server.serve("supervisor", svc)
        sub.subscribe("supervisor", lambda t, b: (events.append((t, b)), seen.set()))
        sub.transport.cast("supervisor", ECHO, {"text": "c"})

        def delivered() -> bool:  # slow joiner: republish until the subscription is live
            server.publish("runtime.child_started", {"name": "store"})
            return seen.wait(0.05)

        poll_for(delivered, 5, interval_s=0, what="a published event delivered to the subscriber")
        assert events[0] == ("runtime.child_started", {"name": "store"})
        poll_for(lambda: svc.casts, 5, what="the cast handled")
        assert svc.casts[0].envelope.kind == "cast"
    finally:
        sub.stop()
        server.stop()


def test_single_process_inproc(home: GeodeHome) -> None:
    a = Bus("store", 1, home, single_process=True).start()
    b = Bus("loop-1", 1, home, single_process=True).start()
    try:
        a.serve("store", FixtureService("store", 1))
        assert b.transport.call("store", runtime.PING, timeout_s=5)["name"] == "store"
        assert not (home.run_dir / "store.sock").exists()
    finally:
        b.stop()
        a.stop()


def test_tcp_bind_requires_curve(home: GeodeHome) -> None:
    plain = Bus("store", 1, home, endpoints=Endpoints(home, tcp={"store": "tcp://127.0.0.1:0"})).start()
    try:
        with pytest.raises(ConfigError, match="unauthenticated"):
            plain.serve("store", FixtureService("store", 1))
    finally:
        plain.stop()


def test_tcp_with_curve(home: GeodeHome) -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    eps = Endpoints(home, tcp={"store": f"tcp://127.0.0.1:{port}"}, curve=CurveKeys.generate())
    a = Bus("store", 1, home, endpoints=eps).start()
    b = Bus("client", 1, home, endpoints=eps).start()
    try:
        a.serve("store", FixtureService("store", 1))
        assert b.transport.call("store", runtime.PING, timeout_s=5)["pid"] == os.getpid()
    finally:
        b.stop()
        a.stop()


def test_tcp_curve_rejects_unknown_client_key(home: GeodeHome) -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    keys = CurveKeys.generate()
    tcp = {"store": f"tcp://127.0.0.1:{port}"}
    a = Bus("store", 1, home, endpoints=Endpoints(home, tcp=tcp, curve=keys)).start()
    stranger = CurveKeys.generate()  # knows the server's public key, but its own key is not allowed
    ctx = zmq.Context()
    raw = ctx.socket(zmq.DEALER)
    raw.setsockopt(zmq.LINGER, 0)
    raw.curve_serverkey, raw.curve_publickey, raw.curve_secretkey = (
        keys.public,
        stranger.public,
        stranger.secret,
    )
    try:
        a.serve("store", FixtureService("store", 1))
        raw.connect(tcp["store"])
        raw.send(codec.encode(Envelope(type=runtime.PING, **{"from": "x#1"})))
        assert not raw.poll(700), "an unknown CURVE client got an answer"
        friend = Bus("client", 1, home, endpoints=Endpoints(home, tcp=tcp, curve=keys)).start()
        try:
            assert friend.transport.call("store", runtime.PING, timeout_s=5)["name"] == "store"
        finally:
            friend.stop()
    finally:
        raw.close(0)
        ctx.term()
        a.stop()


def test_close_never_hangs_with_requests_in_flight(home: GeodeHome) -> None:
    bus = Bus("client", 1, home).start()
    errors: list[BaseException] = []

    def call() -> None:
        try:
            bus.transport.call("nobody", runtime.PING, timeout_s=30)
        except Exception as exc:
            errors.append(exc)

    t = threading.Thread(target=call)
    t.start()
    poll_for(lambda: bus._pending, 5, what="the call in flight")
    t0 = time.monotonic()
    bus.stop()
    t.join(3)
    assert time.monotonic() - t0 < 3 and errors and not t.is_alive()
    assert not list(home.run_dir.glob("*.sock"))
