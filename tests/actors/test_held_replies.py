"""A thread that completes several deferred replies in a row inside ``geode.protocol.later.answering`` (the
store writer answering one group commit) holds their replies and sends them together as the block ends
(``actors.bus.reply_outbox.HeldReplies``): one socket lock, a peer's replies as one batch frame; every
reply still reaches its caller, in order; nothing is held past the block."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from actors.bus import Bus
from actors.bus.reply_outbox import HOLD_MAX_PARTS
from actors.bus.shared_socket import SharedSocket
from geode.home import GeodeHome
from geode.protocol.later import Later, answering
from geode.protocol.transport import Request
from tests.actors.bus_fixtures import ECHO
from tests.waiting import poll_for

N = 8


class Deferring:
    inline_types: frozenset[str] = frozenset({ECHO})  # read on the bus thread; answered by the test's thread

    def __init__(self) -> None:
        self.waiting: list[tuple[str, Later]] = []

    def handle(self, request: Request) -> Later:
        later = Later()
        self.waiting.append((request.body.text, later))  # type: ignore[attr-defined]
        return later


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[tuple[Bus, Bus, Deferring]]:
    home = GeodeHome(tmp_path / "h").ensure()
    server = Bus("srv", 1, home).start()
    client = Bus("cli", 1, home).start()
    svc = Deferring()
    server.serve("deferring", svc)
    try:
        yield server, client, svc
    finally:
        client.stop()
        server.stop()


def _sends(monkeypatch: Any) -> list[int]:
    """How many replies each grouped send of a wire carried (held replies leave through it)."""
    sent: list[int] = []
    real = SharedSocket._send_grouped

    def recording(wire: SharedSocket, items: list[list[bytes]], batch: bool) -> None:
        sent.append(len(items))
        real(wire, items, batch)

    monkeypatch.setattr(SharedSocket, "_send_grouped", recording)
    return sent


def _answer(svc: Deferring, n: int) -> None:
    def run() -> None:
        with answering():
            for text, later in svc.waiting[:n]:
                later.resolve({"text": text})
        del svc.waiting[:n]

    t = threading.Thread(target=run, name="answers")
    t.start()
    t.join(10)


def test_a_blocks_replies_leave_together_as_it_ends_in_order(
    pair: tuple[Bus, Bus, Deferring], monkeypatch: Any
) -> None:
    _, client, svc = pair
    waits = [
        client.transport.call_nowait("deferring", ECHO, {"text": f"t{i}"}, timeout_s=20) for i in range(N)
    ]
    poll_for(lambda: len(svc.waiting) == N)
    sent = _sends(monkeypatch)
    _answer(svc, N)
    assert [w()["text"] for w in waits] == [f"t{i}" for i in range(N)]
    assert sent == [N]  # one send under one lock (a batch frame to the one peer), not N sends


def test_a_long_block_sends_what_it_holds_every_hold_max_parts(
    pair: tuple[Bus, Bus, Deferring], monkeypatch: Any
) -> None:
    _, client, svc = pair
    n = HOLD_MAX_PARTS + 3
    waits = [
        client.transport.call_nowait("deferring", ECHO, {"text": f"t{i}"}, timeout_s=20) for i in range(n)
    ]
    poll_for(lambda: len(svc.waiting) == n)
    sent = _sends(monkeypatch)
    _answer(svc, n)
    assert [w()["text"] for w in waits] == [f"t{i}" for i in range(n)]
    assert sent == [HOLD_MAX_PARTS, 3]


def test_outside_a_block_a_deferred_reply_is_not_held(pair: tuple[Bus, Bus, Deferring]) -> None:
    _, client, svc = pair
    wait = client.transport.call_nowait("deferring", ECHO, {"text": "alone"}, timeout_s=20)
    poll_for(lambda: len(svc.waiting) == 1)
    svc.waiting.pop()[1].resolve({"text": "alone"})
    assert wait()["text"] == "alone"
