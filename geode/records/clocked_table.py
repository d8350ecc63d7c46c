"""The base of a table the store's single writer keeps on the record environment with its own wall clock:
the occurrence ledger's job table (:mod:`geode.records.schedule_jobs`) and the webhook intake table
(:mod:`geode.records.intake_table`)."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from geode.records.lmdb_env import RecordEnv
from geode.records.settings import StoreConfig
from geode.records.writer import GroupWriter


class ClockedTable:
    """``renv`` and its group ``writer``, the store's settings, and ``clock`` (seconds since the epoch: it
    stamps rows and judges leases and windows; tests replace it)."""

    def __init__(
        self,
        renv: RecordEnv,
        writer: GroupWriter,
        config: StoreConfig | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.renv = renv
        self.writer = writer
        self.config = config or StoreConfig()
        self.clock = clock

    def now(self) -> datetime:
        return datetime.fromtimestamp(self.clock(), UTC)

    def _db(self, name: str) -> Any:
        return self.renv.db(name)
