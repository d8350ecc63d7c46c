"""Inline fast path: a service's ``inline_types`` run on the bus thread, validated like any request."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from actors.bus import Bus
from geode.home import GeodeHome
from geode.protocol.errors import BadRequest, RemoteError
from tests.actors.bus_fixtures import BOOM, ECHO, FixtureService


class InlineService(FixtureService):
    inline_types = frozenset({ECHO, BOOM})

    def __init__(self) -> None:
        super().__init__("inline", 1)
        self.threads: list[str] = []

    def handle(self, request: Any) -> BaseModel | dict[str, Any] | None:
        self.threads.append(threading.current_thread().name)
        return super().handle(request)


def test_inline_types_run_on_the_bus_thread_and_are_validated(tmp_path: Path) -> None:
    home = GeodeHome(tmp_path / "h").ensure()
    server = Bus("srv", 1, home, single_process=True).start()
    client = Bus("cli", 1, home, single_process=True).start()
    try:
        svc = InlineService()
        server.serve("inline", svc)
        assert client.transport.call("inline", ECHO, {"text": "hi"}, timeout_s=5)["text"] == "hi"
        assert svc.threads == ["bus-srv"]
        with pytest.raises(BadRequest):  # an invalid body still gets bad_request at the receiver
            client.transport.call("inline", ECHO, {"text": 3}, timeout_s=5)
        with pytest.raises(RemoteError):  # a handler exception is `internal`; the bus thread lives on
            client.transport.call("inline", BOOM, {}, timeout_s=5)
        client.transport.cast("inline", ECHO, {"text": "cast"})
        assert client.transport.call("inline", ECHO, {"text": "after"}, timeout_s=5)["text"] == "after"
        assert [r.body.text for r in svc.casts] == ["hi", "cast", "after"]
    finally:
        client.stop()
        server.stop()
