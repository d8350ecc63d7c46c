"""A child's tracing, started after the fork (never in the zygote: a provider built there would be one
state copied into every child) and stopped at the child's stop, when what is queued gets a bounded flush.

The stop line says what the child's tracing did: on/off, how many OpenTelemetry SDK modules it loaded (0 when
off; the API package alone a provider SDK imports anyway), how many envelopes arrived with ``trace`` and how
many spans were dropped (docs/observability.md)."""

from __future__ import annotations

import logging
import sys

from geode.config_schema import GeodeConfig
from geode.telemetry import spans

log = logging.getLogger("actors.tree.telemetry")
# what tracing brings in (the opentelemetry API package alone is imported by a provider SDK either way)
SDK_MODULES = ("opentelemetry.sdk", "opentelemetry.exporter", "opentelemetry.proto")


class Tracing:
    """This child's tracer (``backend`` None when ``[telemetry] otlp_endpoint`` is empty)."""

    def __init__(self, process: str, settings: GeodeConfig) -> None:
        s = settings.telemetry
        self.backend = None
        if s.enabled:
            from geode.telemetry.export import turn_on

            self.backend = turn_on(s, process)
            log.info("telemetry: traces to %s as %s (%s)", s.otlp_endpoint, s.service_name, process)

    def stop(self) -> None:
        loaded = sum(1 for m in list(sys.modules) if m.startswith(SDK_MODULES))
        log.info(
            "telemetry: %s; opentelemetry SDK modules loaded %d; traced envelopes received %d; "
            "spans dropped %d",
            "on" if self.backend is not None else "off",
            loaded,
            spans.received(),
            spans.dropped(),
        )
        if self.backend is not None:
            self.backend.shutdown()
