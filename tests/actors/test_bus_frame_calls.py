"""Python calls of the per-frame path, counted (deterministic work, not timing): the server's bus thread per
inline request, and the caller's thread per round trip (its reply read by the caller itself).

Session 7 (issue 34, BUS) took the small wrappers off that path (a poll wake's ``_handle_ready``, the read
loop's second frame, ``_answer`` for a sent reply, ``decode_fast``/``typed_model`` once built, ``_packb``,
``env.expired``/``now_ms``, ``new_id`` of a reply, ``_waiting``, ``_peer_route``, ``unwrap`` of an ok reply,
``PendingReply.set``/``is_set``) and the caller's burst check after the reply it read at its first look. The
frame is still validated once with pydantic, and a malformed one still gets ``bad_request``."""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from types import FrameType
from typing import Any

import pytest

from actors.bus import Bus
from geode.home import GeodeHome
from geode.protocol.errors import BadRequest
from geode.protocol.transport import Request
from tests.actors.bus_fixtures import ECHO

N = 40
# Python calls on the server's bus thread per inline request: 27.1-27.9 before, 19.7-20.9 after session 7 (on
# 3.11; 22.3-22.5 on 3.12), 16.7-16.8 since session 10 (pyzmq's option lookup without its Enum call: 2 frames
# a ZMQ_EVENTS ask, actors/bus/socket_options.py; SharedSocket.send in one frame; an ok reply without
# _settle/dump), 15.5-15.7 since session 11 (dispatch_untraced without dispatch_wire's call when no trace).
# A wake that finds nothing, zmq.Again raised, adds ~4: timing, hence the margin
SERVER_CEILING = 18.5
# on the calling thread per round trip: 34.0-34.2 before, 24.3-24.7 after session 7 (3.12: 26.4-26.6),
# 21.3-21.5 since session 10 (the Enum call, SharedSocket.send, a map body not dumped, PendingReply.set
# inlined), 16.5-16.6 since session 11 (no trace_for/spans.outgoing while tracing is off, BusTransport.call
# without _send, a reply's envelope validated without validate_envelope's call); the reply there at the
# first look or not: one drain more or less
CLIENT_CEILING = 20.5


class InlineEcho:
    inline_types = frozenset({ECHO})

    def handle(self, request: Request) -> dict[str, Any]:
        return {"text": request.body.text}  # type: ignore[attr-defined]


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[tuple[Bus, Bus, dict[int, int], list[bool]]]:
    counts: dict[int, int] = {}  # thread ident -> Python calls while counting
    on = [False]

    def prof(frame: FrameType, event: str, arg: object) -> None:
        if on[0] and event == "call":
            ident = threading.get_ident()
            counts[ident] = counts.get(ident, 0) + 1

    home = GeodeHome(tmp_path / "h").ensure()
    threading.setprofile(prof)  # threads started from now on: the buses' threads
    try:
        server = Bus("srv", 1, home, single_process=True).start()
        client = Bus("cli", 1, home, single_process=True).start()
    finally:
        threading.setprofile(None)  # type: ignore[arg-type]
    server.serve("inline", InlineEcho())
    sys.setprofile(prof)  # this (calling) thread
    try:
        yield server, client, counts, on
    finally:
        sys.setprofile(None)
        client.stop()
        server.stop()


def test_python_calls_per_inline_round_trip(pair: tuple[Bus, Bus, dict[int, int], list[bool]]) -> None:
    server, client, counts, on = pair
    tr = client.transport
    for i in range(10):  # warm: the typed validator built, the DEALER connected
        assert tr.call("inline", ECHO, {"text": f"w{i}"}, timeout_s=5) == {"text": f"w{i}"}
    on[0] = True
    for i in range(N):
        assert tr.call("inline", ECHO, {"text": f"t{i}"}, timeout_s=5) == {"text": f"t{i}"}
    on[0] = False
    bus_thread = server._bus_ident
    assert bus_thread is not None
    per_request = counts.get(bus_thread, 0) / N
    per_call = counts.get(threading.get_ident(), 0) / N
    assert 5 <= per_request <= SERVER_CEILING, per_request
    assert 5 <= per_call <= CLIENT_CEILING, per_call
    # the same path still validates: a body its model refuses is answered bad_request
    with pytest.raises(BadRequest):
        tr.call("inline", ECHO, {"text": 3}, timeout_s=5)
