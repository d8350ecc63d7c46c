"""The exporting half of tracing: a TracerProvider per process with a bounded BatchSpanProcessor that sends
OTLP/HTTP from its own thread. Imported only when ``[telemetry] otlp_endpoint`` is set, in each child after
the fork (a provider built in the zygote would be one shared state copied into every child).

A slow or unreachable collector never holds up a turn: spans wait in a queue of ``max_queue_size``; what does
not fit, and every span of a batch the collector did not take, is dropped and counted, and the first drop is
logged once per process."""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from typing import Any

from opentelemetry.context import Context
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.trace import (
    Link,
    NonRecordingSpan,
    SpanContext,
    SpanKind,
    Status,
    StatusCode,
    TraceFlags,
    set_span_in_context,
)
from opentelemetry.trace import Span as OtelSpan

from geode.telemetry import spans
from geode.telemetry.settings import TelemetrySection

log = logging.getLogger(__name__)
KINDS = {
    "internal": SpanKind.INTERNAL,
    "server": SpanKind.SERVER,
    "client": SpanKind.CLIENT,
    "producer": SpanKind.PRODUCER,
    "consumer": SpanKind.CONSUMER,
}
SHUTDOWN_FLUSH_MS = 2000  # at a child's stop: what is queued gets this long to reach the collector


class Drops:
    """Spans lost to a full queue or a failed export: counted always, logged the first time only."""

    def __init__(self) -> None:
        self.count = 0
        self._lock = threading.Lock()

    def add(self, n: int, why: str) -> None:
        with self._lock:
            first = self.count == 0
            self.count += n
        if first:
            log.warning("telemetry: %d span(s) dropped (%s); later drops are counted, not logged", n, why)


class _CountingExporter(SpanExporter):
    """The OTLP exporter, with every span of a refused or failed batch counted as dropped."""

    def __init__(self, inner: SpanExporter, drops: Drops) -> None:
        self.inner, self.drops = inner, drops

    def export(self, batch: Sequence[ReadableSpan]) -> SpanExportResult:
        try:
            result = self.inner.export(batch)
        except Exception as exc:  # the exporter's bug or a transport error it did not catch
            result, why = SpanExportResult.FAILURE, f"{type(exc).__name__}"
        else:
            why = "the collector did not take a batch"
        if result is not SpanExportResult.SUCCESS:
            self.drops.add(len(batch), why)
        return result

    def shutdown(self) -> None:
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.inner.force_flush(timeout_millis)


class _BoundedProcessor(BatchSpanProcessor):
    """A BatchSpanProcessor that counts (and does not log per span) what a full queue refuses."""

    def __init__(self, exporter: SpanExporter, s: TelemetrySection, drops: Drops) -> None:
        super().__init__(
            exporter,
            max_queue_size=s.max_queue_size,
            schedule_delay_millis=s.schedule_delay_s * 1000,
            max_export_batch_size=min(s.max_export_batch_size, s.max_queue_size),
            export_timeout_millis=s.export_timeout_s * 1000,
        )
        self._cap, self._drops = s.max_queue_size, drops

    def on_end(self, span: ReadableSpan) -> None:
        if len(self._batch_processor._queue) >= self._cap:
            self._drops.add(1, "the export queue is full")
            return
        super().on_end(span)

    def shutdown(self) -> None:
        self._batch_processor.shutdown(timeout_millis=SHUTDOWN_FLUSH_MS)


def parse(traceparent: str) -> SpanContext:
    _, trace_id, span_id, flags = traceparent.split("-")
    return SpanContext(
        int(trace_id, 16), int(span_id, 16), is_remote=True, trace_flags=TraceFlags(int(flags, 16))
    )


def format_traceparent(sc: SpanContext) -> str:
    return f"00-{sc.trace_id:032x}-{sc.span_id:016x}-{int(sc.trace_flags):02x}"


class LiveSpan:
    """A recording span; inside ``with`` it is this thread's trace context (outgoing envelopes carry it)."""

    __slots__ = ("_span", "_token", "traceparent")

    def __init__(self, span: OtelSpan) -> None:
        self._span = span
        self._token: Any = None
        self.traceparent: str | None = format_traceparent(span.get_span_context())

    def __enter__(self) -> LiveSpan:
        self._token = spans._current.set(self.traceparent)
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if isinstance(exc, BaseException):
            self.fail(f"{type(exc).__name__}: {exc}")
        self._span.end()
        if self._token is not None:
            spans._current.reset(self._token)
            self._token = None

    def set(self, key: str, value: Any) -> None:
        if value is not None:
            self._span.set_attribute(key, value)

    def fail(self, message: str) -> None:
        from geode.redaction import redact_text

        self._span.set_status(Status(StatusCode.ERROR, redact_text(message, 300)))

    def end(self) -> None:
        self._span.end()


class Exporting:
    """This process's tracer: spans go to ``[telemetry] otlp_endpoint`` through the bounded processor."""

    def __init__(self, s: TelemetrySection, process: str) -> None:
        self.include_content = s.include_content
        self.drops = Drops()
        logging.getLogger("opentelemetry.exporter.otlp.proto.http").setLevel(logging.CRITICAL)  # drops: ours
        resource = Resource.create({"service.name": s.service_name, "service.instance.id": process})
        self.provider = TracerProvider(resource=resource, shutdown_on_exit=False)
        exporter = OTLPSpanExporter(endpoint=s.otlp_endpoint, timeout=s.export_timeout_s)
        self.provider.add_span_processor(
            _BoundedProcessor(_CountingExporter(exporter, self.drops), s, self.drops)
        )
        self.tracer = self.provider.get_tracer("geode")

    def start(
        self,
        name: str,
        parent: str | None,
        attrs: dict[str, Any] | None,
        *,
        kind: str,
        start_ns: int | None,
        link: str | None,
    ) -> LiveSpan:
        ctx = set_span_in_context(NonRecordingSpan(parse(parent))) if parent else Context()
        clean = {k: v for k, v in attrs.items() if v is not None} if attrs else None
        links = [Link(parse(link))] if link and spans.TRACEPARENT.match(link) else None
        sp = self.tracer.start_span(
            name,
            context=ctx,
            kind=KINDS.get(kind, SpanKind.INTERNAL),
            attributes=clean,
            links=links,
            start_time=start_ns,
        )
        return LiveSpan(sp)

    def dropped(self) -> int:
        return self.drops.count

    def shutdown(self) -> None:
        self.provider.shutdown()


def turn_on(s: TelemetrySection, process: str) -> Exporting | None:
    """Build this process's tracer and install it (``None`` and nothing imported beyond this when off)."""
    if not s.enabled:
        return None
    backend = Exporting(s, process)
    spans.install(backend)
    return backend
