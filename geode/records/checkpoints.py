"""Checkpoints: one chain per session; messages stored incrementally under (session, index) + a state record.

A save writes only what is new since ``base_count`` (messages at ``base_count`` and beyond are replaced, which
also serves context compaction) and the small state record. Idempotent by (session, seq).
"""

from __future__ import annotations

import time
from collections import OrderedDict
from typing import Any

from geode.protocol.errors import Conflict
from geode.protocol.later import Later
from geode.records.lmdb_env import RecordEnv, Txn, key, prefix, scan_prefix, unpack
from geode.records.models import (
    CheckpointSave,
    CheckpointState,
    Restored,
    RestorePage,
    SaveResult,
    SessionStatus,
    SessionSummary,
)
from geode.records.save_digest import packed_save, record_bytes, same_save
from geode.records.writer import GroupWriter
from geode.redaction import bound
from geode.work_tally import CHECKPOINT_SAVE
from geode.work_tally import count as tally

TERMINAL = (SessionStatus.COMPLETED, SessionStatus.ERROR)
PAGE_BYTES = 512 * 1024  # restore pages stay well under the 1 MiB frame cap


def _check_transition(old: SessionStatus, new: SessionStatus, reopen: bool, session_id: str) -> None:
    if old in TERMINAL and new not in TERMINAL and not reopen:
        raise Conflict(f"session {session_id} is {old.value}; saving it as {new.value} needs reopen=True")


class StateMemo:
    """The last state record seen per session, keyed by its stored bytes: a record whose bytes are the ones
    remembered is not validated again; any other bytes (an older version's, a rolled-back write's) are. The
    ``cap`` most recently saved sessions are kept (least recently used dropped first): a session saves every
    round of its turn, so a few hundred cover every session saving at once, and the store's heap stays flat
    (a soak of 10,000 one-turn sessions grew it ~7 KiB a session with a 4,096-session clear-all cap)."""

    def __init__(self, cap: int = 256) -> None:
        self.cap = cap
        # a record this process wrote is kept as its fields (the model is built on its first read: a save
        # needs only a few of them, and the next save of the session replaces it, issue 34)
        self._seen: OrderedDict[str, tuple[bytes, CheckpointState | dict[str, Any]]] = OrderedDict()

    def state(self, session_id: str, raw: bytes) -> CheckpointState:
        hit = self._seen.get(session_id)
        if hit is not None and hit[0] == raw:
            self._seen.move_to_end(session_id)
            held = hit[1]
            if isinstance(held, dict):
                # the free-form values as the stored bytes read (a frame's bytes value is stored as text)
                typed = {"status": held["status"], "pending_batch": held["pending_batch"]}
                held = CheckpointState.model_construct(**{**unpack(raw), **typed})
                self._seen[session_id] = (raw, held)
            return held
        state = CheckpointState.model_validate(unpack(raw))
        self.remember(session_id, raw, state)
        return state

    def fields(self, session_id: str, raw: bytes) -> dict[str, Any]:
        """The record's fields as :meth:`state` would hold them (``status`` a SessionStatus), no model built
        for a record this process wrote."""
        hit = self._seen.get(session_id)
        if hit is not None and hit[0] == raw and isinstance(hit[1], dict):
            self._seen.move_to_end(session_id)
            return hit[1]
        return self.state(session_id, raw).__dict__

    def remember(self, session_id: str, raw: bytes, state: CheckpointState | dict[str, Any]) -> None:
        """``state``: the validated record, or the fields validating ``raw`` gives (their values typed)."""
        self._seen[session_id] = (raw, state)
        self._seen.move_to_end(session_id)
        while len(self._seen) > self.cap:
            self._seen.popitem(last=False)

    def __len__(self) -> int:
        return len(self._seen)


class CheckpointStore:
    def __init__(self, renv: RecordEnv, writer: GroupWriter) -> None:
        self.renv = renv
        self.writer = writer
        self.memo = StateMemo()

    # writes -------------------------------------------------------------------------------------------
    def save(self, save: CheckpointSave) -> SaveResult:
        return self.writer.run(lambda txn: self._save(txn, save))

    def save_later(self, save: CheckpointSave, *, wire: bool = False) -> Later:
        """:meth:`save` without waiting: a ``Later`` of the result, completed after the sync commit.
        ``wire``: the save was decoded from a frame (see :func:`packed_save`); its ``Later`` then
        holds the reply's body map (:meth:`_save_body`) instead of the model."""
        if wire:
            return self.writer.submit(lambda txn: self._save_body(txn, save))
        return self.writer.submit(lambda txn: self._save(txn, save))

    def _save(self, txn: Txn, save: CheckpointSave) -> SaveResult:
        sid, seq, count, status, noop = self._write(txn, save, False)
        return SaveResult(
            session_id=sid,
            seq=seq,
            message_count=count,
            status=status,
            noop=noop,
            receipts_open=self._receipts_open(txn, sid),
        )

    def _save_body(self, txn: Txn, save: CheckpointSave) -> dict[str, Any]:
        """A save decoded from a frame, written; its reply's body as ``SaveResult(...)`` dumped for the bus
        gives it (no model built to be dumped again)."""
        sid, seq, count, status, noop = self._write(txn, save, True)
        return {
            "session_id": sid,
            "seq": seq,
            "message_count": count,
            "status": status.value,
            "noop": noop,
            "receipts_open": self._receipts_open(txn, sid),
        }

    def _receipts_open(self, txn: Txn, session_id: str) -> bool:
        """Whether the session holds an admitted or uncertain receipt, read in the save's own write (so in
        the single writer's order: after every admit, commit and mark written before it). A receipt becomes
        uncertain only from admitted, so with none open the session gains an uncertain receipt only through
        a new admit: a call its turn sends after this save (see geode/loop/checkpoint.py)."""
        for _ in scan_prefix(txn, self.renv.db("rc_open"), prefix(session_id)):
            return True
        return False

    def _write(self, txn: Txn, save: CheckpointSave, wire: bool) -> tuple[str, int, int, SessionStatus, bool]:
        """The save's puts; what its :class:`SaveResult` says (session, seq, message count, status, noop)."""
        tally(CHECKPOINT_SAVE)
        sid = save.session_id
        dumped, packed_msgs, entries, digest = packed_save(save, wire)
        raw = txn.get(key(sid), db=self.renv.db("ck_state"))
        state = self.memo.fields(sid, raw) if raw else None
        born = save.session_created_at  # the saver's fence: the session it restored, not one made since
        if born is not None and (state is None or state["created_at"] != born):
            raise Conflict(f"checkpoint of {sid}: the session its saver restored is gone (recreated?)")
        if state is not None and save.seq <= state["seq"]:
            seen = txn.get(key(sid, save.seq), db=self.renv.db("ck_seqfp"))
            if seen is not None and same_save(seen, digest, save):
                return sid, state["seq"], state["message_count"], state["status"], True
            raise Conflict(
                f"checkpoint seq {save.seq} of {sid} already saved with different content "
                f"(latest seq {state['seq']})"
            )
        count = state["message_count"] if state else 0
        if save.base_count > count:
            raise Conflict(
                f"checkpoint of {sid}: base_count {save.base_count} but the store has {count} messages"
            )
        if state is not None:
            _check_transition(state["status"], save.status, save.reopen, sid)
        msgs = self.renv.db("ck_msgs")
        for i in range(save.base_count, count):  # replaced tail (compaction / rewritten history)
            txn.delete(key(sid, i), db=msgs)
        for i, m in enumerate(packed_msgs):  # as the digest took them
            txn.put(key(sid, save.base_count + i), m, db=msgs)
        now = time.time()
        # the state record, as CheckpointState(...).model_dump(mode="json") makes it, from the dump above
        record = {
            "session_id": sid,
            "seq": save.seq,
            "message_count": save.base_count + len(save.new_messages),
            "status": dumped["status"],
            "cognitive_state": dumped["cognitive_state"],
            "guard_counters": dumped["guard_counters"],
            "pending_batch": dumped["pending_batch"],
            "model_settings": dumped["model_settings"],
            "meta": {**(state["meta"] if state else {}), **dumped["meta"]},
            "created_at": state["created_at"] if state else now,
            "updated_at": now,
        }
        packed = record_bytes(entries, record["meta"], record["created_at"], now)  # pack_text(record)
        txn.put(key(sid), packed, db=self.renv.db("ck_state"))
        txn.put(key(sid, save.seq), digest, db=self.renv.db("ck_seqfp"))
        # what validating ``packed`` gives, from parts validated already (the save's); the model on demand
        self.memo.remember(
            sid, packed, {**record, "status": save.status, "pending_batch": save.pending_batch}
        )
        return sid, save.seq, record["message_count"], save.status, False

    def delete_session(self, txn: Txn, session_id: str) -> None:
        """Remove a session's checkpoint chain (called inside a pruning write)."""
        txn.delete(key(session_id), db=self.renv.db("ck_state"))
        for name in ("ck_msgs", "ck_seqfp"):
            db = self.renv.db(name)
            for k, _ in list(scan_prefix(txn, db, prefix(session_id))):
                txn.delete(k, db=db)

    # reads --------------------------------------------------------------------------------------------
    def state(self, session_id: str) -> CheckpointState | None:
        with self.renv.read() as txn:
            raw = txn.get(key(session_id), db=self.renv.db("ck_state"))
        return self.memo.state(session_id, raw) if raw else None

    def load_page(
        self, session_id: str, from_index: int = 0, max_bytes: int = PAGE_BYTES
    ) -> RestorePage | None:
        with self.renv.read() as txn:
            raw = txn.get(key(session_id), db=self.renv.db("ck_state"))
            if raw is None:
                return None
            state = self.memo.state(session_id, raw)
            out: list[dict[str, Any]] = []
            size = 0
            nxt: int | None = None
            cur = txn.cursor(db=self.renv.db("ck_msgs"))
            pfx = prefix(session_id)
            if from_index < state.message_count and cur.set_range(key(session_id, from_index)):
                for k, v in cur:
                    if not k.startswith(pfx):
                        break
                    idx = int.from_bytes(k[len(pfx) :], "big")
                    if idx >= state.message_count:
                        break
                    if out and size + len(v) > max_bytes:
                        nxt = idx
                        break
                    out.append(unpack(v))
                    size += len(v)
        return RestorePage(state=state, messages=out, from_index=from_index, next_index=nxt)

    def load(self, session_id: str) -> Restored | None:
        """The one restore path (all pages)."""
        page = self.load_page(session_id, 0, max_bytes=1 << 62)
        if page is None:
            return None
        return Restored(state=page.state, messages=page.messages)

    def states(self) -> list[CheckpointState]:
        with self.renv.read() as txn:
            cur = txn.cursor(db=self.renv.db("ck_state"))
            return [CheckpointState.model_validate(unpack(v)) for _, v in cur]

    def summaries(self, open_counts: dict[str, int], *, limit: int = 200) -> list[SessionSummary]:
        states = sorted(self.states(), key=lambda s: s.updated_at, reverse=True)[:limit]
        return [
            SessionSummary(
                session_id=s.session_id,
                status=s.status,
                seq=s.seq,
                message_count=s.message_count,
                updated_at=s.updated_at,
                meta=bound(s.meta, max_str=512, max_items=16, max_depth=3),
                unresolved_receipts=open_counts.get(s.session_id, 0),
            )
            for s in states
        ]

    def prunable(self, older_than: float) -> list[str]:
        """Terminal sessions not updated since ``older_than`` (epoch seconds)."""
        return [s.session_id for s in self.states() if s.status in TERMINAL and s.updated_at < older_than]
