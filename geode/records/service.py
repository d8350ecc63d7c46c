"""The store endpoint's Service: maps ``store.*`` messages (and ``runtime.child_died``) onto the engine.

Plain durable writes reply from the writer thread after their group commit (deferred replies, ``Later``) and
are declared inline, so a write parks no handler thread; receipts stay on handler threads (fault points)."""

from __future__ import annotations

import logging
from typing import Any

from pydantic import BaseModel

from geode.faults import fault
from geode.protocol import runtime as rt
from geode.protocol import store as m
from geode.protocol.dispatch import Dispatch
from geode.protocol.later import Later
from geode.protocol.transport import Request
from geode.records.checkpoint_rows import save_with_rows_later
from geode.records.engine import RecordEngine
from geode.records.intake_service import IntakeRoutes
from geode.records.models import TurnRecord, TurnState
from geode.records.schedule_service import LedgerRoutes
from geode.records.search_feed import SearchFeed
from geode.records.search_service import SearchRoutes
from geode.records.timeline_many import append_many
from geode.records.writer import WRITE_TIMEOUT_S
from geode.redaction import canonical_json

log = logging.getLogger(__name__)
PAGE_BYTES = 512 * 1024
INLINE_TYPES = frozenset({m.CHECKPOINT_SAVE, m.TIMELINE_APPEND, m.TURN_PUT, m.CURSOR_SET, m.DEDUPE, rt.PING})
INLINE_TYPES |= {m.TIMELINE_APPEND_MANY}  # a tool call's rows together (geode/records/timeline_many.py)


class StoreService:
    """Stateless adapter; every durable decision is the engine's."""

    def __init__(
        self,
        engine: RecordEngine,
        *,
        name: str = "store",
        incarnation: int = 0,
        search: SearchFeed | None = None,
    ) -> None:
        self.engine = engine
        self.search = search  # the search index's feed: done turns are indexed after their commit
        self.name = name
        self.incarnation = incarnation
        ledger = LedgerRoutes(engine.schedule)  # store.schedule.*: the scheduler's occurrence ledger
        intake = IntakeRoutes(engine.intake)  # store.webhook.*: the webhook intake table
        found = SearchRoutes(search)  # store.search.*: the index over past sessions
        self.dispatch = Dispatch(
            "the store",
            {
                m.CHECKPOINT_LOAD: self._load,
                m.SESSIONS_LIST: self._list_sessions,
                m.RECEIPT_ADMIT: self._admit,
                m.RECEIPT_COMMIT: self._commit,
                m.RECEIPT_UNCERTAIN: lambda b, r: m.ReceiptReply(
                    receipt=engine.receipts.mark_uncertain(b.operation_id, b.reason or "marked uncertain")
                ),
                m.RECEIPT_GET: lambda b, r: m.ReceiptReply(receipt=engine.get_receipt(b.operation_id)),
                m.RECEIPT_LIST: self._list_receipts,
                m.RECEIPT_RECONCILE: lambda b, r: m.ReceiptReply(
                    receipt=engine.reconcile(
                        b.operation_id,
                        outcome=b.outcome,
                        by=b.by or r.sender,
                        note=b.note,
                        evidence=b.evidence,
                    )
                ),
                m.RECEIPT_OWNER_DIED: lambda b, r: m.OwnerDiedReply(
                    uncertain=engine.owner_died(b.name, b.incarnation)
                ),
                rt.CHILD_DIED: self._child_died,
                m.TIMELINE_READ: self._read_timeline,
                m.EVIDENCE_APPEND: lambda b, r: m.EvidenceReply(
                    written=engine.append_evidence(
                        b.session_id,
                        b.kind,
                        b.payload,
                        turn_id=b.turn_id,
                        call_id=b.call_id,
                        summary=b.summary,
                    )
                ),
                m.TURN_GET: lambda b, r: m.TurnReply(turn=engine.get_turn(b.turn_id)),
                m.TURN_LIST: self._list_turns,
                m.CURSOR_GET: lambda b, r: m.CursorReply(
                    position=engine.get_cursor(b.platform, b.account, b.channel)
                ),
                m.STATS: lambda b, r: m.StatsReply(stats=self._stats()),
                m.PRUNE: lambda b, r: m.PruneReply(pruned=self.prune()),
                rt.PING: lambda b, r: rt.Pong(name=self.name, incarnation=self.incarnation, pid=_pid()),
                rt.STATUS: lambda b, r: rt.StatusReply(
                    name=self.name, incarnation=self.incarnation, pid=_pid(), detail=self._stats()
                ),
                **ledger.plain,
                **intake.plain,
                **found.plain,
            },
            deferred={
                m.CHECKPOINT_SAVE: self._save,
                m.TIMELINE_APPEND: self._append,
                m.TIMELINE_APPEND_MANY: lambda b, r: append_many(engine.timeline, b.events),
                m.TURN_PUT: self._put_turn,
                m.CURSOR_SET: self._set_cursor,
                m.DEDUPE: lambda b, r: engine.cursors.dedupe_later(b.key, ttl_s=b.ttl_s, token=b.token).map(
                    lambda first: m.DedupeReply(first=first)
                ),
                **ledger.deferred,
                **intake.deferred,
            },
            # cheap and non-blocking: validate and queue for the writer (a large frame still goes to a
            # handler thread: the bus runs inline only small frames)
            inline=INLINE_TYPES | frozenset(ledger.deferred) | frozenset(intake.deferred),
        )
        self.inline_types = self.dispatch.inline_types
        self.handle = self.dispatch.handle_later

    # handlers with a little more to do --------------------------------------------------------------
    def _save(self, b: m.SaveCheckpoint, r: Request) -> Later:
        # SaveCheckpoint is a CheckpointSave; its timeline rows (if any) are written in the same operation
        return save_with_rows_later(self.engine.checkpoints, self.engine.timeline, b, wire=True)

    def _put_turn(self, b: m.PutTurn, r: Request) -> Later:
        # a done turn is indexed once its commit returned (a put that finds its turn done already was
        # indexed when that turn was stored done, or by the feed's sync at start)
        # (the reply made in the write, from the stored dump, in both cases)
        if self.search is not None and b.state == TurnState.DONE:
            return self.engine.turns.put_reply_later(b, self._turn_stored)
        return self.engine.turns.put_reply_later(b)

    def _turn_stored(self, turn: TurnRecord) -> None:
        if self.search is not None:
            try:
                self.search.turn_stored(turn)  # queued: indexed by the feed's thread, never on the writer's
            except Exception:  # derived data: a write's reply never fails for it (the sync catches up)
                log.exception("search index: turn %s not queued", turn.turn_id)

    def prune(self) -> dict[str, int]:
        """Retention, then the search index drops what the records no longer hold."""
        pruned = self.engine.prune()
        if self.search is not None and pruned.get("sessions"):
            self.search.request_sync()
        return pruned

    def _load(self, b: m.LoadCheckpoint, r: Request) -> BaseModel:
        return m.LoadReply(page=self.engine.checkpoints.load_page(b.session_id, b.from_index, PAGE_BYTES))

    def _admit(self, b: m.AdmitReceipt, r: Request) -> BaseModel:
        owner = b.owner or r.sender
        out = self.engine.admit(
            b.operation_id,
            b.identity,
            owner=owner,
            effect=b.effect,
            attempt=b.attempt,
            observation=b.observation,
            after=b.after,
        )
        fault("store.after_admit")
        if b.identity.is_chat_reply():
            fault("store.after_reply_admit")
        return out

    def _commit(self, b: m.CommitReceipt, r: Request) -> BaseModel:
        reply = m.ReceiptReply(receipt=self.engine.receipts.commit(b.operation_id, b.result))
        fault("store.after_commit")
        if reply.receipt is not None and reply.receipt.identity.is_chat_reply():
            fault("store.after_reply_commit")
        return reply

    def _child_died(self, b: rt.ChildDied, r: Request) -> BaseModel:
        released = self.engine.schedule.release_later(b.name, b.incarnation).result(WRITE_TIMEOUT_S)
        if released:
            log.warning("%s#%d died: %d occurrence leases released", b.name, b.incarnation, released)
        n = self.engine.owner_died(b.name, b.incarnation)
        if n:
            log.warning(
                "%s#%d died (%s): %d admitted receipts now uncertain", b.name, b.incarnation, b.reason, n
            )
        return rt.Ack()

    def _append(self, b: m.AppendTimeline, r: Request) -> Later:
        return self.engine.timeline.append_later(b, _append_reply)  # AppendTimeline is a TimelineEvent

    def _read_timeline(self, b: m.ReadTimeline, r: Request) -> BaseModel:
        rows = self.engine.timeline.read(b.session_id, after_seq=b.after_seq, limit=b.limit + 1)
        more = len(rows) > b.limit
        rows = rows[: b.limit]
        size = 0
        for i, row in enumerate(rows):
            size += len(canonical_json(row.event.payload)) + 256
            if size > PAGE_BYTES and i > 0:
                return m.TimelinePage(rows=rows[:i], next_after=rows[i - 1].seq)
        return m.TimelinePage(rows=rows, next_after=rows[-1].seq if more and rows else None)

    def _list_sessions(self, b: m.ListSessions, r: Request) -> BaseModel:
        rows = self.engine.list_sessions(limit=b.limit)
        size = 0
        for i, row in enumerate(rows):
            size += len(canonical_json(row.model_dump(mode="json"))) + 64
            if size > PAGE_BYTES and i > 0:
                return m.SessionList(sessions=rows[:i], truncated=True)
        return m.SessionList(sessions=rows)

    def _list_turns(self, b: m.ListTurns, r: Request) -> BaseModel:
        rows = self.engine.turns.list(state=b.state, session_id=b.session_id)
        page = rows[b.offset : b.offset + b.limit]
        size = 0
        for i, t in enumerate(page):
            size += len(canonical_json(t)) + 64
            if size > PAGE_BYTES and i > 0:
                return m.TurnList(turns=page[:i], next_offset=b.offset + i)
        more = b.offset + len(page) < len(rows)
        return m.TurnList(turns=page, next_offset=b.offset + len(page) if more else None)

    def _list_receipts(self, b: m.ListReceipts, r: Request) -> BaseModel:
        rows = self.engine.receipts.list(
            session_id=b.session_id, uncertain_only=b.uncertain_only, limit=b.limit
        )
        size = 0
        for i, rec in enumerate(rows):
            size += len(canonical_json(rec.result)) + 1024
            if size > PAGE_BYTES and rec.result is not None:
                rows[i] = rec.model_copy(update={"result": {"omitted": True, "hint": "store.receipt.get"}})
        return m.ReceiptList(receipts=rows)

    def _set_cursor(self, b: m.SetCursor, r: Request) -> Later:
        later = self.engine.cursors.set_later(b.platform, b.account, b.channel, b.position)
        return later.map(lambda _: m.CursorReply(position=b.position))

    def _stats(self) -> dict[str, Any]:
        return self.engine.stats()


def _append_reply(seq: int) -> dict[str, int]:
    """``AppendReply(seq=seq)`` as the reply's body map (what dumping the model gives, without the model)."""
    return {"seq": seq}


def _pid() -> int:
    import os

    return os.getpid()
