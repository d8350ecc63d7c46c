"""StoreClient: the RecordClient other actors use, over any Transport (LocalTransport or the bus).

Calls that fail with ``timeout``, ``unavailable`` or ``not_ready`` are retried with backoff; that is safe
because every write carries its idempotency key (a retried admit or dedupe reuses its attempt token).
"""

from __future__ import annotations

import os
import time
from typing import Any

from geode.protocol import store as m
from geode.protocol.errors import ErrorCode, GeodeError
from geode.protocol.transport import Transport
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
from geode.work_tally import STORE_CALL
from geode.work_tally import count as tally

RETRYABLE = (ErrorCode.TIMEOUT, ErrorCode.UNAVAILABLE, ErrorCode.NOT_READY, ErrorCode.OVERLOADED)


def _token() -> str:
    return os.urandom(8).hex()


def _row(e: TimelineEvent) -> dict[str, Any]:
    """``e.model_dump()`` for the frame: its fields, the payload not copied (it is packed at once)."""
    return {
        "session_id": e.session_id,
        "event_id": e.event_id,
        "kind": e.kind,
        "ts": e.ts,
        "payload": e.payload,
    }


class StoreClient:
    """Typed calls to the store endpoint. ``attempts`` tries per call (1 = no retry)."""

    def __init__(
        self,
        transport: Transport,
        target: str = "store",
        *,
        timeout_s: float = 5.0,
        attempts: int = 4,
        backoff_s: float = 0.05,
        max_backoff_s: float = 1.0,
    ) -> None:
        self.transport = transport
        self.target = target
        self.timeout_s = timeout_s
        self.attempts = max(1, attempts)
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        self.retries = 0  # how many retries this client made (observability)
        self.evidence_failures = 0

    def _call(self, type_: str, body: Any, *, session: str | None = None) -> dict[str, Any]:
        delay = self.backoff_s
        for i in range(self.attempts):
            tally(STORE_CALL, type_)
            try:
                return self.transport.call(
                    self.target, type_, body, session=session, timeout_s=self.timeout_s
                )
            except GeodeError as exc:
                if exc.code not in RETRYABLE or i == self.attempts - 1:
                    raise
                self.retries += 1
                time.sleep(delay)
                delay = min(delay * 2, self.max_backoff_s)
        raise AssertionError("unreachable")

    # checkpoints ------------------------------------------------------------------------------------
    def save_checkpoint(self, save: CheckpointSave) -> SaveResult:
        # a SaveCheckpoint is a CheckpointSave: the validated model goes as it is (the store validates it)
        return SaveResult.model_validate(self._call(m.CHECKPOINT_SAVE, save, session=save.session_id))

    def load_checkpoint(self, session_id: str, from_index: int = 0) -> Restored | None:
        """The one restore path: every page of messages, in order, with the state record of the first page.
        ``from_index``: the messages from there only (a caller that holds the ones before it)."""
        messages: list[dict[str, Any]] = []
        index = from_index
        state = None
        while True:
            body = m.LoadCheckpoint(session_id=session_id, from_index=index)
            reply = m.LoadReply.model_validate(self._call(m.CHECKPOINT_LOAD, body, session=session_id))
            if reply.page is None:
                return None
            if state is None:
                state = reply.page.state
            elif reply.page.state.seq != state.seq:  # saved while we paged: start over for a consistent view
                messages, index, state = [], from_index, None
                continue
            messages.extend(reply.page.messages)
            if reply.page.next_index is None:
                return Restored(state=state, messages=messages)
            index = reply.page.next_index

    def list_sessions(self, *, limit: int = 200) -> list[SessionSummary]:
        return self.sessions_page(limit=limit).sessions

    def sessions_page(self, *, limit: int = 200) -> m.SessionList:
        """Like :meth:`list_sessions`, with ``truncated`` set when the store cut the list to fit one reply."""
        return m.SessionList.model_validate(self._call(m.SESSIONS_LIST, m.ListSessions(limit=limit)))

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
        body = m.AdmitReceipt(
            operation_id=operation_id,
            identity=identity,
            owner=owner,
            effect=effect,
            attempt=attempt or _token(),
            observation=observation,
            after=after,
        )
        return AdmitResult.model_validate(self._call(m.RECEIPT_ADMIT, body, session=identity.session_id))

    def commit(self, operation_id: str, result: dict[str, Any]) -> None:
        self._call(m.RECEIPT_COMMIT, m.CommitReceipt(operation_id=operation_id, result=result))

    def mark_uncertain(self, operation_id: str, reason: str) -> None:
        self._call(m.RECEIPT_UNCERTAIN, m.MarkUncertain(operation_id=operation_id, reason=reason[:500]))

    def get_receipt(self, operation_id: str) -> Receipt | None:
        reply = self._call(m.RECEIPT_GET, m.GetReceipt(operation_id=operation_id))
        return m.ReceiptReply.model_validate(reply).receipt

    def list_receipts(
        self, *, session_id: str | None = None, uncertain_only: bool = False, limit: int = 200
    ) -> list[Receipt]:
        body = m.ListReceipts(session_id=session_id, uncertain_only=uncertain_only, limit=limit)
        return m.ReceiptList.model_validate(self._call(m.RECEIPT_LIST, body)).receipts

    def reconcile(
        self,
        operation_id: str,
        *,
        outcome: str,
        by: str,
        note: str = "",
        evidence: Observation | None = None,
    ) -> Receipt:
        body = m.ReconcileReceipt(
            operation_id=operation_id, outcome=outcome, by=by, note=note, evidence=evidence
        )
        receipt = m.ReceiptReply.model_validate(self._call(m.RECEIPT_RECONCILE, body)).receipt
        assert receipt is not None
        return receipt

    def owner_died(self, name: str, incarnation: int) -> int:
        reply = self._call(m.RECEIPT_OWNER_DIED, m.OwnerDied(name=name, incarnation=incarnation))
        return m.OwnerDiedReply.model_validate(reply).uncertain

    # timeline and evidence --------------------------------------------------------------------------
    def append_timeline(self, event: TimelineEvent) -> None:
        self._call(m.TIMELINE_APPEND, event, session=event.session_id)  # an AppendTimeline is a TimelineEvent

    def append_timelines(self, events: list[TimelineEvent]) -> list[str]:
        """Several rows, in order, in one round trip (``store.timeline.append_many``, at most
        ``m.MAX_APPEND_MANY``); the errors of the rows not appended (empty: all were)."""
        # each row's fields as they are (``model_dump`` of an Any payload: ~16 us a row); a payload holding
        # something msgpack lacks (a model) is dumped by pydantic when the frame is packed, as before
        body = {"events": [_row(e) for e in events]}
        return m.AppendManyReply.model_validate(self._call(m.TIMELINE_APPEND_MANY, body)).errors

    def read_timeline(self, session_id: str) -> list[TimelineRow]:
        rows: list[TimelineRow] = []
        after = 0
        while True:
            body = m.ReadTimeline(session_id=session_id, after_seq=after)
            page = m.TimelinePage.model_validate(self._call(m.TIMELINE_READ, body, session=session_id))
            rows.extend(page.rows)
            if page.next_after is None:
                return rows
            after = page.next_after

    def append_evidence(
        self, session_id: str, kind: str, payload: dict[str, Any], *, wait: bool = False, **kw: Any
    ) -> bool:
        """Best-effort, never raises. By default a cast (never blocks a turn): True once sent. With
        ``wait=True`` one short request: True when the row was written. Failures are counted."""
        try:
            body = m.AppendEvidence(session_id=session_id, kind=kind, payload=payload, **kw)
            tally(STORE_CALL, m.EVIDENCE_APPEND)
            if not wait:
                self.transport.cast(self.target, m.EVIDENCE_APPEND, body, session=session_id)
                return True
            reply = self.transport.call(
                self.target, m.EVIDENCE_APPEND, body, session=session_id, timeout_s=1.0
            )
            written = m.EvidenceReply.model_validate(reply).written
        except Exception:
            written = False
        if not written:
            self.evidence_failures += 1
        return written

    # turns, cursors, dedupe -------------------------------------------------------------------------
    def put_turn(self, turn: TurnRecord) -> TurnRecord:
        reply = self._call(m.TURN_PUT, turn, session=turn.session_id)  # a PutTurn is a TurnRecord
        out = m.TurnReply.model_validate(reply).turn
        assert out is not None
        return out

    def get_turn(self, turn_id: str) -> TurnRecord | None:
        return m.TurnReply.model_validate(self._call(m.TURN_GET, m.GetTurn(turn_id=turn_id))).turn

    def list_turns(self, *, state: str | None = None, session_id: str | None = None) -> list[TurnRecord]:
        """Every matching turn record, oldest first (paged under the hood)."""
        out: list[TurnRecord] = []
        offset: int | None = 0
        while offset is not None:
            body = m.ListTurns(state=state, session_id=session_id, offset=offset)
            page = m.TurnList.model_validate(self._call(m.TURN_LIST, body))
            out.extend(page.turns)
            offset = page.next_offset
        return out

    def get_cursor(self, platform: str, account: str, channel: str) -> str | None:
        body = m.GetCursor(platform=platform, account=account, channel=channel)
        return m.CursorReply.model_validate(self._call(m.CURSOR_GET, body)).position

    def set_cursor(self, platform: str, account: str, channel: str, position: str) -> None:
        self._call(
            m.CURSOR_SET, m.SetCursor(platform=platform, account=account, channel=channel, position=position)
        )

    def dedupe(self, key: str, *, ttl_s: float, token: str = "") -> bool:
        body = m.Dedupe(key=key, ttl_s=ttl_s, token=token or _token())
        return m.DedupeReply.model_validate(self._call(m.DEDUPE, body)).first

    # maintenance ------------------------------------------------------------------------------------
    def stats(self) -> dict[str, Any]:
        return m.StatsReply.model_validate(self._call(m.STATS, m.StatsQuery())).stats

    def prune(self) -> dict[str, int]:
        return m.PruneReply.model_validate(self._call(m.PRUNE, m.Prune())).pruned
