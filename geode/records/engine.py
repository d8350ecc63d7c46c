"""The record store in one object: the LMDB environment, the group writer and every store on top.

``RecordEngine`` implements :class:`geode.records.client.RecordClient` directly (in-process use); the store
child wraps it in :class:`geode.records.service.StoreService`.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from geode.home import GeodeHome
from geode.metrics import record as metrics
from geode.records.checkpoint_rows import save_with_rows
from geode.records.checkpoints import CheckpointStore
from geode.records.cursors import CursorStore
from geode.records.evidence import EvidenceLedger
from geode.records.intake_table import IntakeTable
from geode.records.lmdb_env import RecordEnv
from geode.records.models import (
    AdmitResult,
    CheckpointSave,
    Observation,
    Receipt,
    ReceiptIdentity,
    Restored,
    RestorePage,
    SaveResult,
    SessionSummary,
    TimelineEvent,
    TimelineRow,
    TurnRecord,
)
from geode.records.receipts import ReceiptStore
from geode.records.schedule_ledger import ScheduleLedger
from geode.records.settings import StoreConfig
from geode.records.timeline import TimelineStore
from geode.records.turns import TurnStore
from geode.records.writer import GroupWriter


class RecordEngine:
    """Open with :meth:`open` (or as a context manager); one per process."""

    def __init__(self, records_dir: Path, evidence_dir: Path, config: StoreConfig | None = None) -> None:
        self.config = config or StoreConfig()
        self.renv = RecordEnv(records_dir, self.config)
        self.writer = GroupWriter(self.renv, max_batch=self.config.max_batch, queue_max=self.config.queue_max)
        self.checkpoints = CheckpointStore(self.renv, self.writer)
        self.receipts = ReceiptStore(self.renv, self.writer, self.config)
        self.timeline = TimelineStore(self.renv, self.writer, self.config.timeline_max_payload)
        self.turns = TurnStore(self.renv, self.writer)
        self.cursors = CursorStore(self.renv, self.writer)
        self.schedule = ScheduleLedger(self.renv, self.writer, self.config)
        self.intake = IntakeTable(self.renv, self.writer, self.config)  # webhook deliveries
        self.evidence = EvidenceLedger(evidence_dir)
        self.started_at = 0.0

    @classmethod
    def for_home(cls, home: GeodeHome, config: StoreConfig | None = None) -> RecordEngine:
        """The home's store with ``config`` (the snapshot's ``[store]``; the defaults when None)."""
        return cls(home.records_dir, home.evidence_dir, config)

    def open(self) -> RecordEngine:
        self.renv.open()
        self.turns.ensure_session_index()
        self.writer.start()
        self.started_at = time.time()
        self._count_uncertain()
        return self

    def _count_uncertain(self) -> None:
        """The ``geode_receipts_uncertain`` gauge (scanned only when metrics are on)."""
        if metrics.enabled():
            metrics.receipts_uncertain(len(self.receipts.list(uncertain_only=True, limit=1_000_000)))

    def close(self) -> None:
        self.writer.stop()
        self.renv.close()

    def __enter__(self) -> RecordEngine:
        return self.open()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # checkpoints ------------------------------------------------------------------------------------
    def save_checkpoint(self, save: CheckpointSave) -> SaveResult:
        return save_with_rows(self.checkpoints, self.timeline, save)  # its timeline rows in the same write

    def load_checkpoint(self, session_id: str) -> Restored | None:
        return self.checkpoints.load(session_id)

    def load_checkpoint_page(self, session_id: str, from_index: int = 0) -> RestorePage | None:
        return self.checkpoints.load_page(session_id, from_index)

    def list_sessions(self, *, limit: int = 200) -> list[SessionSummary]:
        return self.checkpoints.summaries(self.receipts.open_counts(), limit=limit)

    # receipts ---------------------------------------------------------------------------------------
    def admit(
        self,
        operation_id: str,
        identity: ReceiptIdentity,
        *,
        owner: str,
        effect: str = "",
        attempt: str = "",
        observation: Observation | None = None,
        after: str = "",
    ) -> AdmitResult:
        return self.receipts.admit(
            operation_id,
            identity,
            owner=owner,
            effect=effect,
            attempt=attempt,
            observation=observation,
            after=after,
        )

    def commit(self, operation_id: str, result: dict[str, Any]) -> None:
        self.receipts.commit(operation_id, result)

    def mark_uncertain(self, operation_id: str, reason: str) -> None:
        self.receipts.mark_uncertain(operation_id, reason)
        self._count_uncertain()

    def get_receipt(self, operation_id: str) -> Receipt | None:
        return self.receipts.get(operation_id)

    def list_receipts(self, *, session_id: str | None = None, uncertain_only: bool = False) -> list[Receipt]:
        return self.receipts.list(session_id=session_id, uncertain_only=uncertain_only)

    def reconcile(
        self,
        operation_id: str,
        *,
        outcome: str,
        by: str,
        note: str = "",
        evidence: Observation | None = None,
    ) -> Receipt:
        settled = self.receipts.reconcile(operation_id, outcome=outcome, by=by, note=note, evidence=evidence)
        self._count_uncertain()
        return settled

    def owner_died(self, name: str, incarnation: int) -> int:
        n = self.receipts.owner_died(name, incarnation)
        self._count_uncertain()
        return n

    # timeline and evidence --------------------------------------------------------------------------
    def append_timeline(self, event: TimelineEvent) -> None:
        self.timeline.append(event)

    def read_timeline(self, session_id: str) -> list[TimelineRow]:
        return self.timeline.read(session_id)

    def append_evidence(self, session_id: str, kind: str, payload: dict[str, Any], **kw: Any) -> bool:
        return self.evidence.append(session_id, kind, payload, **kw)

    # turns, cursors, dedupe -------------------------------------------------------------------------
    def put_turn(self, turn: TurnRecord) -> TurnRecord:
        return self.turns.put(turn)

    def get_turn(self, turn_id: str) -> TurnRecord | None:
        return self.turns.get(turn_id)

    def list_turns(self, *, state: str | None = None, session_id: str | None = None) -> list[TurnRecord]:
        return self.turns.list(state=state, session_id=session_id)

    def get_cursor(self, platform: str, account: str, channel: str) -> str | None:
        return self.cursors.get(platform, account, channel)

    def set_cursor(self, platform: str, account: str, channel: str, position: str) -> None:
        self.cursors.set(platform, account, channel, position)

    def dedupe(self, key: str, *, ttl_s: float, token: str = "") -> bool:
        return self.cursors.dedupe(key, ttl_s=ttl_s, token=token)

    # maintenance ------------------------------------------------------------------------------------
    def prune(self, *, now: float | None = None) -> dict[str, int]:
        """Drop terminal sessions past retention (timeline, resolved receipts, turns too) and old receipts."""
        now = now or time.time()
        doomed = self.checkpoints.prunable(now - self.config.session_retention_days * 86400)

        def _drop(txn: Any) -> int:
            for sid in doomed:
                self.checkpoints.delete_session(txn, sid)
                self.timeline.delete_session(txn, sid)
            self.receipts.delete_sessions(txn, set(doomed))
            self.turns.delete_sessions(txn, set(doomed))
            return len(doomed)

        sessions = self.writer.run(_drop) if doomed else 0
        receipts = self.receipts.prune(now)
        dedupe = self.cursors.expire()
        occurrences = self.schedule.prune()
        intakes = self.intake.prune()
        return {
            "sessions": sessions,
            "receipts": receipts,
            "dedupe_keys": dedupe,
            "occurrences": occurrences,
            "intakes": intakes,
        }

    def stats(self) -> dict[str, Any]:
        return {
            **self.renv.stats(),
            "writer": self.writer.stats.as_dict(),
            "evidence": self.evidence.stats(),
            "uptime_s": round(time.time() - self.started_at, 3),
        }
