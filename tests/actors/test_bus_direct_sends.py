"""A request is sent by the thread that makes it and a reply by the handler thread that made it, on the
shared socket under its lock (no hand-off through the bus thread); the bus thread, polling the sockets'
edge-triggered ``ZMQ_FD``, still reads every frame (a send that consumed the edge says so)."""

from __future__ import annotations

import select
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import zmq

from actors.bus import Bus
from actors.bus.parts import make_socket
from actors.bus.shared_socket import SharedSocket
from geode.home import GeodeHome
from tests.actors.bus_fixtures import ECHO, FixtureService
from tests.waiting import poll_for


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Bus, Bus, FixtureService]]:
    home = GeodeHome(Path(tmp_path_factory.mktemp("direct")) / "h").ensure()
    server = Bus("srv", 1, home).start()
    client = Bus("cli", 1, home).start()
    svc, ordered = FixtureService("srv", 1), FixtureService("srv", 1)
    server.serve("svc", svc, concurrency=4)
    server.serve("ordered", ordered, concurrency=1)  # one handler thread: frames handled in arrival order
    try:
        yield server, client, ordered
    finally:
        client.stop()
        server.stop()


def test_a_request_and_its_reply_are_sent_by_the_threads_that_made_them(
    pair: tuple[Bus, Bus, FixtureService], monkeypatch: Any
) -> None:
    """Before: the caller posted its request to its bus thread (an eventfd wake), and the handler posted its
    reply to the server's bus thread: two hand-offs per round trip, none now."""
    server, client, _ = pair
    assert client.transport.call("svc", ECHO, {"text": "warm"}, timeout_s=10)["text"] == "warm"
    posts: list[str] = []
    for bus in (server, client):
        real_post = bus._post

        def counting(op: Any, real_post: Any = real_post, who: str = bus.name) -> None:
            posts.append(who)
            real_post(op)

        monkeypatch.setattr(bus, "_post", counting)
    senders: list[tuple[int, str]] = []
    real_send = SharedSocket.send

    def recording(wire: SharedSocket, frames: list[bytes], check: bool = True) -> bool:
        senders.append((len(frames), threading.current_thread().name))
        return real_send(wire, frames, check)

    real_reply = SharedSocket.reply

    def recording_reply(wire: SharedSocket, frames: list[bytes]) -> bool:  # a reply from any thread
        senders.append((len(frames), threading.current_thread().name))
        return real_reply(wire, frames)

    real_queue = SharedSocket.queue

    def recording_queue(wire: SharedSocket, frames: list[bytes]) -> bool:  # left to the bus thread, if awake
        queued = real_queue(wire, frames)
        if queued:
            senders.append((len(frames), threading.current_thread().name))
        return queued

    monkeypatch.setattr(SharedSocket, "send", recording)
    monkeypatch.setattr(SharedSocket, "reply", recording_reply)
    monkeypatch.setattr(SharedSocket, "queue", recording_queue)
    for i in range(5):
        assert client.transport.call("svc", ECHO, {"text": f"t{i}"}, timeout_s=10)["text"] == f"t{i}"
    assert posts == []
    main = threading.current_thread().name
    requests = [who for n, who in senders if n == 1]  # the client's DEALER: one frame
    replies = [who for n, who in senders if n == 2]  # the server's ROUTER: routing id and frame
    assert requests == [main] * 5
    assert len(replies) == 5 and all(who.startswith("svc-handlers-") for who in replies), replies


def test_many_threads_pipelining_get_every_reply_and_casts_keep_their_order(
    pair: tuple[Bus, Bus, FixtureService],
) -> None:
    """Six threads, each with ten requests in flight and casts between them, on one shared DEALER: every
    reply reaches its caller (no frame left unread behind a consumed edge) and each thread's casts arrive in
    the order it sent them."""
    _, client, ordered = pair
    errors: list[BaseException] = []

    def work(t: int) -> None:
        try:
            for batch in range(6):
                pending = [
                    client.transport.call_nowait("svc", ECHO, {"text": f"{t}.{batch}.{i}"}, timeout_s=20)
                    for i in range(10)
                ]
                client.transport.cast("ordered", ECHO, {"text": f"{t}:{batch}"})
                for i, result in enumerate(pending):
                    assert result()["text"] == f"{t}.{batch}.{i}"
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(6)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(60)
    assert not errors, errors[:3]
    poll_for(lambda: len(ordered.casts) >= 36, 20, what="every cast handled")
    seen = [getattr(r.body, "text", "") for r in ordered.casts]
    for t in range(6):
        assert [s for s in seen if s.startswith(f"{t}:")] == [f"{t}:{b}" for b in range(6)]


def test_a_send_that_finds_a_frame_waiting_says_so(tmp_path: Path) -> None:
    """The socket's fd signals an edge, and a send may consume it: the send reports the frame waiting so
    that the bus thread is woken to read it (else it would sleep in poll with the frame unread)."""
    ctx = zmq.Context()
    router = make_socket(ctx, zmq.ROUTER, "r")
    dealer = make_socket(ctx, zmq.DEALER, "d")
    try:
        router.bind(f"ipc://{tmp_path}/edge.sock")
        dealer.connect(f"ipc://{tmp_path}/edge.sock")
        wire = SharedSocket(dealer)
        assert wire.send([b"hello"]) is False  # nothing to read yet
        assert router.poll(5000) and router.recv_multipart() == [b"d", b"hello"]
        router.send_multipart([b"d", b"reply"])
        fd = select.poll()
        fd.register(wire.fd, select.POLLIN)
        assert fd.poll(5000), "the dealer's fd never signalled the reply"
        assert wire.send([b"more"]) is True  # the reply waits: the caller must have it read
        assert wire.recv() == [b"reply"]
        assert wire.recv() is None
        wire.close()
        with pytest.raises(zmq.ZMQError):
            wire.send([b"after close"])
        assert wire.recv() is None
    finally:
        router.close(0)
        dealer.close(0)
        ctx.term()
