"""A reply sent while another thread holds a shared socket's lock (``SharedSocket.reply``) does not wait for
it: it goes into the socket's outbox, and the holder sends what the outbox holds as it lets go of the lock,
each peer's replies as one batch frame on a batch wire (one ZeroMQ message), in the order they were queued.

Deterministic: the test thread holds the lock while the replies are queued, over inproc."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
import zmq

from actors.bus.shared_socket import SharedSocket
from geode.protocol import codec

N = 5


@pytest.fixture
def pair() -> Iterator[tuple[SharedSocket, zmq.Socket]]:  # type: ignore[type-arg]
    ctx = zmq.Context()
    router, dealer = ctx.socket(zmq.ROUTER), ctx.socket(zmq.DEALER)
    router.setsockopt(zmq.LINGER, 0)
    dealer.setsockopt(zmq.LINGER, 0)
    dealer.setsockopt(zmq.IDENTITY, b"peer")
    router.bind("inproc://outbox")
    dealer.connect("inproc://outbox")
    dealer.send(b"hello")  # the ROUTER learns the peer's routing id
    assert router.recv_multipart() == [b"peer", b"hello"]
    wire = SharedSocket(router)
    try:
        yield wire, dealer
    finally:
        wire.close()
        dealer.close(0)
        ctx.term()


def _queue_while_held(wire: SharedSocket) -> list[bool]:
    """N replies from another thread while this one holds the lock: each returns at once (not blocked)."""
    returned: list[bool] = []

    def replies() -> None:
        returned.extend(wire.reply([b"peer", b"r%d" % i]) for i in range(N))

    with wire.lock:
        t = threading.Thread(target=replies)
        t.start()
        t.join(5)
        assert not t.is_alive(), "a reply waited for the lock"
        assert len(wire.outbox) == N
    return returned


def _messages(dealer: zmq.Socket) -> list[bytes]:  # type: ignore[type-arg]
    out: list[bytes] = []
    while dealer.poll(100):
        out.append(dealer.recv())
    return out


def test_replies_queued_while_the_lock_is_held_go_out_as_one_batch_when_it_is_let_go(
    pair: tuple[SharedSocket, zmq.Socket],  # type: ignore[type-arg]
) -> None:
    wire, dealer = pair
    wire.batch = True
    waiting: list[int] = []
    wire.on_waiting = lambda: waiting.append(1)
    assert _queue_while_held(wire) == [False] * N
    assert _messages(dealer) == []  # held by nobody but the outbox: nothing sent yet
    dealer.send(b"next")  # a request waits when the holder sends the outbox: on_waiting says so
    assert dealer.poll(0) == 0
    assert wire.readable() is True  # any use of the lock lets go of it: the outbox is sent
    assert not wire.outbox
    got = _messages(dealer)
    assert len(got) == 1 and got[0][:1] in codec.BATCH_HEADS
    assert codec.split_batch(got[0]) == [b"r%d" % i for i in range(N)]
    assert waiting == [1]


def test_on_a_wire_that_takes_no_batch_the_queued_replies_go_one_by_one_in_order(
    pair: tuple[SharedSocket, zmq.Socket],  # type: ignore[type-arg]
) -> None:
    wire, dealer = pair
    _queue_while_held(wire)
    assert wire.recv() is None  # (a receive lets go of the lock too)
    assert _messages(dealer) == [b"r%d" % i for i in range(N)]


def test_a_reply_with_the_lock_free_is_sent_at_once_after_what_the_outbox_holds(
    pair: tuple[SharedSocket, zmq.Socket],  # type: ignore[type-arg]
) -> None:
    wire, dealer = pair
    wire.outbox.append([b"peer", b"first"])  # (queued by a thread whose holder has not let go yet)
    assert wire.reply([b"peer", b"second"]) is False
    assert _messages(dealer) == [b"first", b"second"]
    wire.close()
    with pytest.raises(zmq.ZMQError):
        wire.reply([b"peer", b"late"])
