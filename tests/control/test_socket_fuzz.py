"""Fuzz the real control socket: random, truncated, oversized and mistyped frames; the child never dies."""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from pathlib import Path

import msgpack
import pytest
import zmq

from geode.protocol import codec
from geode.protocol import control as c
from tests.control.procs import Procs


@pytest.fixture
def procs(tmp_path: Path) -> Iterator[Procs]:
    p = Procs(tmp_path).up()
    yield p
    p.close()


def _dealer(procs: Procs) -> zmq.Socket:  # type: ignore[type-arg]
    s = zmq.Context.instance().socket(zmq.DEALER)
    s.setsockopt(zmq.LINGER, 0)
    s.connect(f"ipc://{procs.home.cli_socket}")
    return s


def _frames(rnd: random.Random) -> list[bytes]:
    good = msgpack.packb({"v": 1, "id": "x1", "kind": "request", "type": c.PING, "body": {}})
    out: list[bytes] = [b"", b"\x00", b"\xc1", good[:-1], good[: len(good) // 2]]
    for _ in range(60):
        out.append(rnd.randbytes(rnd.randrange(1, 300)))
    wrong = [
        {"v": 2, "id": "a", "kind": "request", "type": c.PING, "body": {}},
        {"v": 1, "id": "b", "kind": "request", "type": "cli.prompt", "body": {"text": 123}},
        {"v": 1, "id": "c", "kind": "request", "type": "cli.prompt", "body": []},
        {"v": 1, "id": "d", "kind": "request", "type": "lanes.submit", "body": {}},
        {"v": 1, "id": "e", "kind": "request", "type": "Not A Type", "body": {}},
        {"v": 1, "id": "f", "kind": "request", "type": "cli.handshake", "body": {"features": "x" * 10}},
        {
            "v": 1,
            "id": "g",
            "kind": "request",
            "type": "cli.attach",
            "body": {"session_id": "", "after_seq": -1},
        },
        {"v": 1, "id": 5, "kind": "request", "type": c.PING},
        {1: 2},
        [1, 2, 3],
        "just a string",
    ]
    out += [msgpack.packb(w) for w in wrong]
    out.append(
        msgpack.packb(
            {
                "v": 1,
                "id": "big",
                "kind": "request",
                "type": c.PING,
                "body": {"pad": "x" * (codec.MAX_FRAME_BYTES + 10)},
            }
        )
    )
    return out


def test_every_bad_frame_is_answered_bad_request_and_the_child_lives(procs: Procs) -> None:
    rnd = random.Random(7)
    sock = _dealer(procs)
    frames = _frames(rnd)
    for f in frames:
        sock.send(f)
    replies = []
    deadline = time.monotonic() + 10
    while len(replies) < len(frames) and time.monotonic() < deadline:
        if sock.poll(200):
            replies.append(codec.decode_raw(sock.recv()))
    assert len(replies) == len(frames)  # every frame answered (none silently lost)
    codes = {r.get("body", {}).get("code") for r in replies if r.get("kind") == "error"}
    assert codes <= {"bad_request", "not_ready"}
    assert all(r.get("kind") == "error" for r in replies)
    # a frame past libzmq's MAXMSGSIZE (2 MiB) is dropped with its connection; the child survives that too
    sock.send(b"x" * (3 * codec.MAX_FRAME_BYTES))
    sock.close(0)
    assert procs.alive("control")
    cl = procs.client()
    assert cl.request(c.PING, {})["ok"] is True
    cl.close()
    assert procs.alive("control")
