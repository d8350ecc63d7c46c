"""``[telemetry]`` of ``config.toml``: OpenTelemetry traces (off unless ``otlp_endpoint`` is set), a leaf.

``otlp_endpoint`` is the collector's OTLP/HTTP traces URL (``http://127.0.0.1:4318/v1/traces``); ``""`` turns
tracing off: then no OpenTelemetry module is imported, no span is made and no envelope carries ``trace``.
The queue bounds cap what a process holds while a collector is slow or down (the rest is dropped, counted)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, StrictBool, field_validator


class TelemetrySection(BaseModel):
    """``[telemetry]``: where spans go, under which service name, and whether payloads go with them."""

    model_config = ConfigDict(frozen=True)

    otlp_endpoint: str = ""
    service_name: str = Field(default="geode", min_length=1, max_length=128)
    include_content: StrictBool = False
    max_queue_size: int = Field(default=2048, ge=16, le=1_000_000)
    max_export_batch_size: int = Field(default=512, ge=1, le=100_000)
    export_timeout_s: float = Field(default=5.0, gt=0, le=120)
    schedule_delay_s: float = Field(default=1.0, gt=0, le=60)

    @field_validator("otlp_endpoint")
    @classmethod
    def _http_url(cls, value: str) -> str:
        value = value.strip()
        if value and not value.startswith(("http://", "https://")):
            raise ValueError("must be an http(s):// URL of an OTLP/HTTP traces endpoint, or empty for off")
        return value

    @property
    def enabled(self) -> bool:
        return bool(self.otlp_endpoint)
