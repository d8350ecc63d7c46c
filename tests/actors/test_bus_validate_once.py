"""The bus validates a served request once (envelope and body in one pass); posts wake its thread once."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from actors.bus import Bus
from geode.home import GeodeHome
from geode.protocol import catalog, codec
from geode.protocol.envelope import Envelope
from geode.protocol.errors import BadRequest
from tests.actors.bus_fixtures import ECHO, FixtureService
from tests.waiting import poll_for


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[tuple[Bus, Bus, FixtureService]]:
    home = GeodeHome(tmp_path / "h").ensure()
    server = Bus("srv", 1, home, single_process=True).start()
    client = Bus("cli", 1, home, single_process=True).start()
    svc = FixtureService("srv", 1)
    server.serve("svc", svc)
    try:
        yield server, client, svc
    finally:
        client.stop()
        server.stop()


def test_a_served_request_is_validated_once(pair: tuple[Bus, Bus, FixtureService], monkeypatch: Any) -> None:
    """Per round trip: the server validates the request once (its typed model: envelope + body), the client
    the reply's envelope once. Before: the server validated the envelope, then the body again (3 in all)."""
    _, client, svc = pair
    assert client.transport.call("svc", ECHO, {"text": "warm"}, timeout_s=5)["text"] == "warm"
    seen: list[str] = []
    envelope_validate = codec._validate_envelope  # Envelope's own validator, without model_validate
    parse_body = catalog.parse_body

    def counting_envelope(obj: Any) -> Envelope:
        seen.append("Envelope")
        return envelope_validate(obj)

    def counting_body(type_: str, body: dict[str, Any]) -> Any:
        seen.append(f"body {type_}")
        return parse_body(type_, body)

    monkeypatch.setattr(codec, "_validate_envelope", counting_envelope)
    monkeypatch.setattr(catalog, "parse_body", counting_body)
    for i in range(5):
        assert client.transport.call("svc", ECHO, {"text": f"t{i}"}, timeout_s=5)["text"] == f"t{i}"
    assert seen == ["Envelope"] * 5  # the five replies, at the client; the requests never re-validated
    assert [getattr(r.body, "text", None) for r in svc.casts[-5:]] == [
        f"t{i}" for i in range(5)
    ]  # typed bodies reached it

    # the body is still checked at the receiver: same message, correlated reply; a bad cast is dropped
    with pytest.raises(BadRequest, match=r"invalid test\.echo body at text: Input should be a valid string"):
        client.transport.call("svc", ECHO, {"text": 3}, timeout_s=5)
    client.transport.cast("svc", ECHO, {"text": ["not", "text"]})
    client.transport.cast("svc", ECHO, {"text": "cast"})
    poll_for(lambda: getattr(svc.casts[-1].body, "text", None) == "cast", 10, what="the valid cast")
    assert all(isinstance(getattr(r.body, "text", None), str) for r in svc.casts)


def test_posts_while_the_bus_thread_sleeps_wake_it_once(pair: tuple[Bus, Bus, FixtureService]) -> None:
    """Ten posts before the sleeping bus thread runs: one eventfd write, not ten (each is a syscall)."""
    _, client, _ = pair
    poll_for(lambda: client._idle, 10, what="the bus thread asleep")
    wakes: list[int] = []
    real_wake = client._wake
    client._wake = lambda: wakes.append(1)  # type: ignore[method-assign]  # held: the thread sleeps on
    ran: list[int] = []
    done = threading.Event()
    for i in range(10):
        client._post(lambda i=i: ran.append(i))  # type: ignore[misc]
    client._post(done.set)
    assert wakes == [1]
    client._wake = real_wake  # type: ignore[method-assign]
    real_wake()  # the one write the posts asked for
    assert done.wait(10)
    assert ran == list(range(10))
    assert client.transport.call("svc", ECHO, {"text": "after"}, timeout_s=5)["text"] == "after"
