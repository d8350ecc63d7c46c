"""The cheap half of tracing in one process: off costs nothing (no SDK import, one shared no-op span, no
``trace`` on an envelope), an unreachable collector never holds up the caller (drops counted, logged once),
payloads go along only with include_content and then redacted, and an envelope's trace reaches the handler."""

from __future__ import annotations

import logging
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest

from geode.protocol import codec
from geode.protocol.envelope import Envelope
from geode.protocol.errors import BadRequest
from geode.protocol.transport import Request, dispatch
from geode.telemetry import spans
from geode.telemetry.settings import TelemetrySection
from geode.testing.otlp_receiver import OtlpReceiver

TP = "00-" + "ab" * 16 + "-" + "cd" * 8 + "-01"


@pytest.fixture
def rx() -> Iterator[OtlpReceiver]:
    with OtlpReceiver() as receiver:
        yield receiver


@pytest.fixture
def on(rx: OtlpReceiver) -> Iterator[Any]:
    from geode.telemetry.export import turn_on

    backend = turn_on(TelemetrySection(otlp_endpoint=rx.endpoint, schedule_delay_s=0.05), "test#1")
    try:
        yield backend
    finally:
        spans.install(None)
        assert backend is not None
        backend.shutdown()


def test_off_imports_no_sdk_and_hands_out_one_noop_span() -> None:
    code = (
        "import sys\n"
        "import actors.loop_worker, actors.executor, actors.lanes, actors.store, actors.control\n"
        "import actors.tree.child_main, actors.tree.telemetry_boot\n"
        "from geode.telemetry import spans\n"
        "a = spans.span('x', root=True); b = spans.span('y', parent='" + TP + "')\n"
        "assert a is spans.NOOP and b is spans.NOOP and spans.outgoing() is None\n"
        "with spans.use('" + TP + "'):\n"
        "    assert spans.current() is None\n"
        "sdk = [m for m in sys.modules if m.startswith(('opentelemetry.sdk', 'opentelemetry.exporter',"
        " 'opentelemetry.proto'))]\n"
        "print(len(sdk), sdk[:3])\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("0 "), out.stdout


def test_an_envelope_without_trace_has_no_trace_key_on_the_wire() -> None:
    assert "trace" not in codec.decode_raw(codec.encode(Envelope(type="a.b")))
    assert codec.decode(codec.encode(Envelope(type="a.b", trace=TP))).trace == TP
    with pytest.raises(BadRequest):  # a malformed traceparent is a bad request, not a crash
        codec.decode(_with_raw_trace("not-a-traceparent"))


def _with_raw_trace(value: str) -> bytes:
    import msgpack

    return msgpack.packb({"v": 1, "id": "x1", "kind": "request", "type": "a.b", "trace": value})


class _Echo:
    def handle(self, request: Request) -> dict[str, Any]:
        return {"current": spans.current()}


def test_a_traced_envelope_runs_its_handler_under_a_server_span(on: Any, rx: OtlpReceiver) -> None:
    env = Envelope(type="runtime.ping", kind="request", trace=TP)
    before = spans.received()
    reply = dispatch(_Echo(), env)  # runtime.ping is QUIET: the handler runs under the sender's context
    assert reply is not None and reply.body["current"] == TP and spans.received() == before + 1
    env = Envelope(type="lanes.status", kind="request", trace=TP)
    reply = dispatch(_Echo(), env)
    assert reply is not None
    current = reply.body["current"]
    assert current.split("-")[1] == "ab" * 16 and current.split("-")[2] != "cd" * 8  # a span of its own
    rows = rx.wait_for(lambda rs: any(r.name == "lanes.status" for r in rs))
    row = next(r for r in rows if r.name == "lanes.status")
    assert row.parent_id == "cd" * 8 and row.kind == "server" and row.instance == "test#1"


def test_payloads_go_along_only_with_include_content_and_redacted(rx: OtlpReceiver) -> None:
    from geode.telemetry.export import turn_on

    secret = "sk-ant-api03-" + "x" * 40
    assert spans.content(f"key {secret}") is None  # off
    backend = turn_on(
        TelemetrySection(otlp_endpoint=rx.endpoint, include_content=True, schedule_delay_s=0.05), "t#1"
    )
    try:
        with spans.span("p", {"geode.input": spans.content(f"use key {secret}")}, root=True):
            pass
    finally:
        spans.install(None)
        assert backend is not None
        backend.shutdown()
    row = rx.wait_for(lambda rs: any(r.name == "p" for r in rs))[0]
    assert "use key" in row.attributes["geode.input"] and secret not in row.attributes["geode.input"]


def _closed_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def test_an_unreachable_collector_never_holds_up_spans_and_drops_are_counted_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from geode.telemetry.export import turn_on

    s = TelemetrySection(
        otlp_endpoint=f"http://127.0.0.1:{_closed_port()}/v1/traces",
        max_queue_size=16,
        max_export_batch_size=8,
        schedule_delay_s=0.05,
        export_timeout_s=0.5,
    )
    backend = turn_on(s, "t#1")
    assert backend is not None
    try:
        with caplog.at_level(logging.WARNING, logger="geode.telemetry.export"):
            t0 = time.monotonic()
            for i in range(500):
                with spans.span(f"s{i}", root=True):
                    pass
            spent = time.monotonic() - t0
            assert spent < 2.0, spent  # 500 spans against a dead collector: no export on this thread
            # the queue holds 16 and the exporter a batch or two in flight: the rest is dropped, counted
            assert backend.dropped() >= 500 - 16 - 64
    finally:
        spans.install(None)
        backend.shutdown()
    warned = [r for r in caplog.records if "dropped" in r.getMessage()]
    assert len(warned) == 1, [r.getMessage() for r in caplog.records]


class _Endpoints:
    def connect_address(self, name: str) -> str:
        return "tcp://10.0.0.1:7701" if name == "store" else f"ipc:///run/{name}.sock"


class _Served:
    def __init__(self) -> None:
        self.peers = {"loop-1": b"a", "w1/loop-1": b"b"}
        self.trace_peers = {"loop-1"}  # w1/loop-1's hello did not say trace (a previous release)


class _BusLike:
    def __init__(self) -> None:
        self._served = {"lanes": _Served()}
        self.endpoints = _Endpoints()


def test_trace_goes_only_to_peers_that_take_it_and_only_with_tracing_on(on: Any) -> None:
    from actors.bus.socket_thread import Bus

    bus = _BusLike()
    with spans.use(TP):
        assert Bus.trace_for(bus, "loop-1") == TP  # type: ignore[arg-type]
        assert Bus.trace_for(bus, "w1/loop-1") is None  # type: ignore[arg-type]
        assert Bus.trace_for(bus, "store") is None  # type: ignore[arg-type]  # main's store over tcp
        assert Bus.trace_for(bus, "executor") == TP  # type: ignore[arg-type]  # this tree's, by ipc
    assert Bus.trace_for(bus, "executor") is None  # type: ignore[arg-type]  # no span running
    spans.install(None)
    with spans.use(TP):
        assert Bus.trace_for(bus, "loop-1") is None  # type: ignore[arg-type]  # tracing off
