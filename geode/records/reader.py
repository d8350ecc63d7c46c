"""The record store read from outside the store process: sessions, receipts and timelines for the operator's
views (`geode sessions`, `receipts`, `timeline`), with or without a daemon, and no bus.

A read-only LMDB handle beside the writer (or with none): readers see committed snapshots and never block it.
The same stores answer as in the store child, so the views print what ``store.*`` requests would return.
"""

from __future__ import annotations

from pathlib import Path

from geode.home import GeodeHome
from geode.records.checkpoints import CheckpointStore
from geode.records.lmdb_env import RecordEnv
from geode.records.models import Receipt, SessionSummary, TimelineRow
from geode.records.receipts import ReceiptStore
from geode.records.settings import StoreConfig
from geode.records.timeline import TimelineStore
from geode.records.writer import GroupWriter


class RecordReader:
    """Open with :meth:`open` (or as a context manager); read-only: it has no write path at all."""

    def __init__(self, records_dir: Path) -> None:
        config = StoreConfig()  # reads use no [store] setting
        self.renv = RecordEnv(records_dir, config)
        no_writer = GroupWriter(self.renv)  # never started: the stores are only asked to read
        self._checkpoints = CheckpointStore(self.renv, no_writer)
        self._receipts = ReceiptStore(self.renv, no_writer, config)
        self._timeline = TimelineStore(self.renv, no_writer, config.timeline_max_payload)

    @classmethod
    def for_home(cls, home: GeodeHome) -> RecordReader:
        return cls(home.records_dir)

    def open(self) -> RecordReader:
        """``NotFound`` when nothing was ever recorded here; ``Unavailable`` when the files cannot be read."""
        self.renv.open_readonly()
        return self

    def close(self) -> None:
        self.renv.close()

    def __enter__(self) -> RecordReader:
        return self.open()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def sessions(self, *, limit: int = 200) -> list[SessionSummary]:
        """Most recently updated first, with each session's unresolved receipts counted."""
        return self._checkpoints.summaries(self._receipts.open_counts(), limit=limit)

    def receipts(
        self, *, session_id: str | None = None, uncertain_only: bool = False, limit: int = 200
    ) -> list[Receipt]:
        """Newest first."""
        return self._receipts.list(session_id=session_id, uncertain_only=uncertain_only, limit=limit)

    def timeline(self, session_id: str) -> list[TimelineRow]:
        """Every row of the session in order (corrupt rows flagged)."""
        return self._timeline.read(session_id, limit=2**62)
