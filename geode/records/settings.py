"""``[store]``: the record store's section and its defaults (a leaf: the LMDB environment and the store
child read it)."""

from __future__ import annotations

from pydantic import BaseModel, Field


class StoreConfig(BaseModel):
    """``[store]`` in config.toml."""

    map_size_mb: int = Field(default=256, ge=1)
    map_max_mb: int = Field(default=16384, ge=1)
    max_batch: int = Field(default=256, ge=1)
    queue_max: int = Field(default=10000, ge=1)
    max_unresolved_receipts: int = Field(default=500, ge=1)
    receipt_keep: int = Field(default=2000, ge=0)
    receipt_retention_days: float = Field(default=30.0, ge=0)
    session_retention_days: float = Field(default=30.0, ge=0)
    timeline_max_payload: int = Field(default=64 * 1024, ge=1024)
    prune_interval_s: float = Field(default=3600.0, ge=0)  # 0 = only at start-up and on store.prune
    handlers: int = Field(default=64, ge=1)  # concurrent request handlers in the store child
    schedule_retention_days: float = Field(default=30.0, ge=0)  # decided occurrences older than this go
    schedule_keep_per_job: int = Field(default=1000, ge=0)  # at most this many decided occurrences per job
    webhook_retention_days: float = Field(default=30.0, ge=0)  # done intakes older (or the longest window)
