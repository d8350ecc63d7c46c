"""OpenTelemetry traces of GEODE's turns (issue 33 item 1), the domain half: no zmq, no pykka.

The cheap API every process calls (:mod:`geode.telemetry.spans`) never imports OpenTelemetry: with
``[telemetry] otlp_endpoint = ""`` it hands out one shared no-op span and no trace context exists, so no
envelope carries ``trace``. :mod:`geode.telemetry.export` (the SDK, the OTLP/HTTP exporter) is imported only
when a child turns tracing on, after the fork (docs/observability.md, "Traces")."""
