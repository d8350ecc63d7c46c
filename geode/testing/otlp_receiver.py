"""A local OTLP/HTTP traces receiver for tests and benchmarks: ``POST /v1/traces`` bodies decoded with the
official ``opentelemetry-proto`` messages (``ExportTraceServiceRequest``) into plain span rows.

``with OtlpReceiver() as rx:`` serves on 127.0.0.1 at a free port (``rx.endpoint``); ``rx.spans()`` is
every span received so far, ``rx.wait_for(pred)`` waits on a condition of them without sleeping."""

from __future__ import annotations

import gzip
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

KINDS = {0: "unspecified", 1: "internal", 2: "server", 3: "client", 4: "producer", 5: "consumer"}


@dataclass(frozen=True)
class SpanRow:
    """One received span: ids in lower-case hex (``parent_id`` "" for a root), its process, attributes."""

    name: str
    trace_id: str
    span_id: str
    parent_id: str
    service: str
    instance: str  # service.instance.id: the child, e.g. "loop-1#2"
    kind: str
    attributes: dict[str, Any] = field(default_factory=dict)
    links: tuple[tuple[str, str], ...] = ()  # (trace_id, span_id)
    error: bool = False
    start_ns: int = 0
    end_ns: int = 0


def _value(v: AnyValue) -> Any:
    which = v.WhichOneof("value")
    if which == "array_value":
        return [_value(x) for x in v.array_value.values]
    if which == "kvlist_value":
        return {kv.key: _value(kv.value) for kv in v.kvlist_value.values}
    return getattr(v, which) if which else None


def decode(body: bytes) -> list[SpanRow]:
    """Every span of one ``ExportTraceServiceRequest`` (protobuf bytes)."""
    req = ExportTraceServiceRequest()
    req.ParseFromString(body)
    rows: list[SpanRow] = []
    for rs in req.resource_spans:
        res = {kv.key: _value(kv.value) for kv in rs.resource.attributes}
        for ss in rs.scope_spans:
            for sp in ss.spans:
                rows.append(
                    SpanRow(
                        name=sp.name,
                        trace_id=sp.trace_id.hex(),
                        span_id=sp.span_id.hex(),
                        parent_id=sp.parent_span_id.hex(),
                        service=str(res.get("service.name", "")),
                        instance=str(res.get("service.instance.id", "")),
                        kind=KINDS.get(sp.kind, str(sp.kind)),
                        attributes={kv.key: _value(kv.value) for kv in sp.attributes},
                        links=tuple((ln.trace_id.hex(), ln.span_id.hex()) for ln in sp.links),
                        error=sp.status.code == 2,
                        start_ns=sp.start_time_unix_nano,
                        end_ns=sp.end_time_unix_nano,
                    )
                )
    return rows


class OtlpReceiver:
    """An OTLP/HTTP (protobuf) traces endpoint on its own thread; it keeps every span it is sent."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        self._rows: list[SpanRow] = []
        self._cond = threading.Condition()
        self.requests = 0
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # http.server's name for it
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                try:
                    rows = decode(body) if self.path.rstrip("/") == "/v1/traces" else None
                except Exception:  # not an ExportTraceServiceRequest
                    rows = None
                if rows is None:
                    self.send_response(400)
                    self.end_headers()
                    return
                receiver._add(rows)
                out = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

            def log_message(self, format: str, *args: Any) -> None:  # quiet
                return None

        self._server = ThreadingHTTPServer((host, port), Handler)
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        self.endpoint = f"http://{host}:{self.port}/v1/traces"
        self._thread = threading.Thread(target=self._server.serve_forever, name="otlp-receiver", daemon=True)

    def _add(self, rows: list[SpanRow]) -> None:
        with self._cond:
            self.requests += 1
            self._rows.extend(rows)
            self._cond.notify_all()

    def spans(self) -> list[SpanRow]:
        with self._cond:
            return list(self._rows)

    def wait_for(self, pred: Any, timeout_s: float = 20.0) -> list[SpanRow]:
        """Wait until ``pred(spans)`` is truthy; the spans then (``AssertionError`` with them on timeout)."""
        with self._cond:
            if not self._cond.wait_for(lambda: pred(list(self._rows)), timeout=timeout_s):
                names = sorted({r.name for r in self._rows})
                raise AssertionError(f"spans not received in {timeout_s:g}s; have {len(self._rows)}: {names}")
            return list(self._rows)

    def start(self) -> Self:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
