"""The envelope's ``trace`` over real buses: a peer of this release (its hello says ``trace``) gets the
sender's trace context with a push; a peer of the previous release (its hello says nothing of it, and its
envelope model forbids unknown fields) gets the same push without the field."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgpack
import pytest
import zmq

from actors.bus import Bus
from geode.home import GeodeHome
from geode.protocol import codec, runtime
from geode.protocol.envelope import Envelope
from geode.telemetry import spans
from geode.telemetry.settings import TelemetrySection
from geode.testing.otlp_receiver import OtlpReceiver
from tests.actors.bus_fixtures import ECHO, FixtureService
from tests.waiting import poll_for

TP = "00-" + "ab" * 16 + "-" + "cd" * 8 + "-01"


@pytest.fixture
def tracing() -> Iterator[None]:
    from geode.telemetry.export import turn_on

    with OtlpReceiver() as rx:
        backend = turn_on(TelemetrySection(otlp_endpoint=rx.endpoint), "test#1")
        try:
            yield
        finally:
            spans.install(None)
            assert backend is not None
            backend.shutdown()


def test_a_push_carries_trace_only_to_a_peer_whose_hello_said_it_takes_it(
    tmp_path: Path, tracing: None
) -> None:
    home = GeodeHome(tmp_path / "h").ensure()
    lanes = Bus("lanes", 1, home).start()
    worker = Bus("loop-1", 1, home).start()
    old = zmq.Context.instance().socket(zmq.DEALER)
    old.setsockopt(zmq.LINGER, 0)
    got: list[Any] = []
    try:
        lanes.serve("lanes", FixtureService("lanes", 1))
        worker.connect_peer("lanes", lambda req: got.append(req.envelope.trace) or {"ok": True})
        old.connect(lanes.endpoints.connect_address("lanes"))
        hello = Envelope(  # what a previous release says: no ``trace`` in its hello
            kind="cast",
            type=runtime.HELLO,
            body={"name": "old-1", "incarnation": 1, "pid": 1},
            **{"from": "old-1#1"},
        )
        old.send(codec.encode(hello))
        poll_for(lambda: {"loop-1", "old-1"} <= set(lanes.peers("lanes")), 5, what="both peers known")
        with spans.use(TP):
            assert lanes.transport.call("loop-1", ECHO, {"text": "run"}, timeout_s=5) == {"ok": True}
            lanes.transport.cast("old-1", ECHO, {"text": "run"})
        assert got == [TP]
        assert old.poll(5000), "the old peer got no push"
        frame = msgpack.unpackb(old.recv(), raw=False)
        assert frame["type"] == ECHO and "trace" not in frame
        lanes.transport.cast("loop-1", ECHO, {"text": "untraced"})  # no span running: no trace either
        poll_for(lambda: len(got) == 2, 5, what="the untraced push")
        assert got[1] is None
    finally:
        old.close()
        worker.stop()
        lanes.stop()
