"""A pykka actor behind a bus endpoint: ask for requests, tell for casts, errors and a dead actor mapped."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pykka
import pytest

from actors.bus import Bus
from actors.bus.actor_service import ActorService
from geode.home import GeodeHome
from geode.protocol import runtime
from geode.protocol.errors import RemoteError, Unavailable
from geode.protocol.transport import Request
from tests.actors.bus_fixtures import BOOM, ECHO


class Counter(pykka.ThreadingActor):
    use_daemon_thread = True

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[str] = []

    def on_receive(self, message: Any) -> Any:
        assert isinstance(message, Request)
        self.seen.append(message.envelope.kind)
        if message.type == BOOM:
            raise ValueError("nope")
        return {"count": len(self.seen)}


def test_actor_behind_endpoint(tmp_path: Path) -> None:
    home = GeodeHome(tmp_path / "h").ensure()
    ref = Counter.start()
    server, client = Bus("counter", 1, home).start(), Bus("cli", 1, home).start()
    try:
        server.serve("counter", ActorService(ref))
        assert client.transport.call("counter", ECHO, {"text": "a"}, timeout_s=5) == {"count": 1}
        client.transport.cast("counter", ECHO, {"text": "b"})
        deadline = time.monotonic() + 5
        while ref.proxy().seen.get() != ["request", "cast"]:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        with pytest.raises(RemoteError, match="ValueError"):
            client.transport.call("counter", BOOM, timeout_s=5)
        assert client.transport.call("counter", runtime.PING, timeout_s=5) == {"count": 4}
        ref.stop()
        with pytest.raises(Unavailable):
            client.transport.call("counter", runtime.PING, timeout_s=5)
    finally:
        client.stop()
        server.stop()
        pykka.ActorRegistry.stop_all()
