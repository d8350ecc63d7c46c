"""The interface other actors use to reach the record store (implemented over any Transport)."""

from __future__ import annotations

from typing import Any, Protocol

from geode.records.models import (
    AdmitResult,
    CheckpointSave,
    Observation,
    Receipt,
    ReceiptIdentity,
    Restored,
    SaveResult,
    SessionSummary,
    TimelineEvent,
    TimelineRow,
    TurnRecord,
)


class RecordClient(Protocol):
    """Typed store calls. Every write carries its idempotency key, so retries never double anything."""

    # checkpoints
    def save_checkpoint(self, save: CheckpointSave) -> SaveResult | None: ...
    def load_checkpoint(self, session_id: str, from_index: int = 0) -> Restored | None: ...
    def list_sessions(self, *, limit: int = 200) -> list[SessionSummary]: ...

    # effect receipts
    def admit(
        self,
        operation_id: str,
        identity: ReceiptIdentity,
        *,
        owner: str,
        effect: str,
        observation: Observation | None = None,
    ) -> AdmitResult: ...
    def commit(self, operation_id: str, result: dict[str, Any]) -> None: ...
    def mark_uncertain(self, operation_id: str, reason: str) -> None: ...
    def get_receipt(self, operation_id: str) -> Receipt | None: ...
    def list_receipts(
        self, *, session_id: str | None = None, uncertain_only: bool = False
    ) -> list[Receipt]: ...
    def reconcile(
        self,
        operation_id: str,
        *,
        outcome: str,
        by: str,
        note: str = "",
        evidence: Observation | None = None,
    ) -> Receipt: ...
    def owner_died(self, name: str, incarnation: int) -> int: ...

    # timeline (observation only; never read back as state by the loop)
    def append_timeline(self, event: TimelineEvent) -> None: ...
    def read_timeline(self, session_id: str) -> list[TimelineRow]: ...

    # turns, cursors, dedupe keys
    def put_turn(self, turn: TurnRecord) -> TurnRecord: ...
    def get_turn(self, turn_id: str) -> TurnRecord | None: ...
    def list_turns(self, *, state: str | None = None, session_id: str | None = None) -> list[TurnRecord]: ...
    def get_cursor(self, platform: str, account: str, channel: str) -> str | None: ...
    def set_cursor(self, platform: str, account: str, channel: str, position: str) -> None: ...
    def dedupe(self, key: str, *, ttl_s: float) -> bool: ...  # True the first time a key is seen
