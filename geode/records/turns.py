"""Turn records keyed by a caller-chosen turn id: queued → running (worker, incarnation) → done (outcome).

``put`` is idempotent: re-putting a record never regresses a turn that is already done, and keeps the
original ``created_at``. The store stamps ``updated_at``.
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import lmdb

from geode.protocol.errors import BadRequest
from geode.protocol.later import Later
from geode.records.lmdb_env import RecordEnv, Txn, key, pack, prefix, scan_prefix, unpack
from geode.records.models import TurnRecord, TurnState
from geode.records.writer import GroupWriter

log = logging.getLogger(__name__)
SESSION_INDEX = b"index:turn_session"  # in ``meta``: the session index covers every turn record
MEMO_CAP = (
    512  # turns not done whose last written record the store remembers (least recently written dropped)
)


class TurnStore:
    def __init__(self, renv: RecordEnv, writer: GroupWriter) -> None:
        self.renv = renv
        self.writer = writer
        # per turn not done: the bytes of the record this process last wrote, its state and created_at (a
        # put finding those bytes stored reads them here, not by unpacking the record: ~10 us a put, issue
        # 34); any other bytes (another version's, a rolled-back write's) are unpacked. Writer thread only.
        self._last: OrderedDict[str, tuple[bytes, str, float]] = OrderedDict()

    def put(self, turn: TurnRecord) -> TurnRecord:
        return self.writer.run(lambda txn: self._put(txn, turn))

    def put_later(self, turn: TurnRecord, reply: Callable[[TurnRecord], Any] | None = None) -> Later:
        """:meth:`put` without waiting: a ``Later`` of the stored record (or of ``reply(record)``: a request's
        reply made in the write, no second ``Later`` to map it), completed after the sync commit."""
        if reply is None:
            return self.writer.submit(lambda txn: self._put(txn, turn))
        return self.writer.submit(lambda txn: reply(self._put(txn, turn)))

    def put_reply_later(self, turn: TurnRecord, stored: Callable[[TurnRecord], None] | None = None) -> Later:
        """:meth:`put_later` for a request: a ``Later`` of the reply's body map, ``TurnReply(turn=record)``
        as the bus dumps it (``exclude_none``: the record's None fields left out), made from the record's
        stored dump instead of dumping the record a second time. ``stored``: told the stored record after
        the commit, before the reply goes (the search feed), the reply still the body map (no ``TurnReply``
        built and dumped for it)."""
        if stored is None:
            return self.writer.submit(lambda txn: self._put_reply(txn, turn))
        return self.writer.submit(lambda txn: self._put_both(txn, turn)).map(lambda both: _told(stored, both))

    def _put_reply(self, txn: Txn, turn: TurnRecord) -> dict[str, Any]:
        return self._reply_of(*self._write(txn, turn, model=False))

    def _put_both(self, txn: Txn, turn: TurnRecord) -> tuple[TurnRecord, dict[str, Any]]:
        """The stored record (a model) and the reply's body map."""
        new, dumped = self._write(txn, turn)
        assert new is not None
        return new, self._reply_of(new, dumped)

    @staticmethod
    def _reply_of(record: TurnRecord | None, dumped: dict[str, Any] | None) -> dict[str, Any]:
        if dumped is None:  # a done record, validated: dumped as the bus would
            assert record is not None
            dumped = record.model_dump(mode="json")
        return {"turn": {k: v for k, v in dumped.items() if v is not None}}

    def _put(self, txn: Txn, turn: TurnRecord) -> TurnRecord:
        new, _ = self._write(txn, turn)
        assert new is not None
        return new

    def _write(
        self, txn: Txn, turn: TurnRecord, *, model: bool = True
    ) -> tuple[TurnRecord | None, dict[str, Any] | None]:
        """The stored record (``None`` when it was written and ``model`` is False: no copy of ``turn`` made
        only to be dumped) and its dump (``None`` when the turn was done already: nothing written, the
        record returned)."""
        db, idx = self.renv.db("turns"), self.renv.db("turn_state")
        raw = txn.get(key(turn.turn_id), db=db)
        # the stored record is this method's own dump: its state and created_at are read, not validated
        # again (a done record is, to be returned)
        hit = self._last.get(turn.turn_id) if raw else None
        now = time.time()
        if hit is not None and hit[0] == raw:  # written by this process, not done
            old_state, created = hit[1], hit[2]
        elif raw:
            old: dict[str, Any] = unpack(raw)
            old_state = str(old.get("state", TurnState.QUEUED.value))
            if old_state == TurnState.DONE.value:
                return TurnRecord.model_validate(old), None
            created = float(old.get("created_at", 0.0))
        else:
            old_state, created = "", turn.created_at or now
        state = turn.state.value
        if old_state:
            txn.delete(key(old_state, turn.turn_id), db=idx)
        txn.put(key(state, turn.turn_id), b"", db=idx)
        txn.put(key(turn.session_id, turn.turn_id), b"", db=self.renv.db("turn_session"))
        # what turn.model_copy(update=...).model_dump(mode="json") gives: both times are floats, dumped as
        # they are
        dumped = turn.model_dump(mode="json")
        dumped["created_at"] = created
        dumped["updated_at"] = now
        packed = pack(dumped)
        txn.put(key(turn.turn_id), packed, db=db)
        self._remember(turn.turn_id, packed, state, created)
        new = turn.model_copy(update={"created_at": created, "updated_at": now}) if model else None
        return new, dumped

    def _remember(self, turn_id: str, packed: bytes, state: str, created: float) -> None:
        last = self._last
        if state == TurnState.DONE.value:  # a done turn's put returns the stored record (validated)
            last.pop(turn_id, None)
            return
        last[turn_id] = (packed, state, created)
        last.move_to_end(turn_id)
        if len(last) > MEMO_CAP:
            last.popitem(last=False)

    def get(self, turn_id: str) -> TurnRecord | None:
        with self.renv.read() as txn:
            raw = txn.get(key(turn_id), db=self.renv.db("turns"))
        return TurnRecord.model_validate(unpack(raw)) if raw else None

    def list(self, *, state: str | None = None, session_id: str | None = None) -> list[TurnRecord]:
        """Matching turn records, oldest first. A session's turns are read through the session index, so
        the cost is that session's turns, not every turn the store ever ran."""
        out: list[TurnRecord] = []
        with self.renv.read() as txn:
            db = self.renv.db("turns")
            if session_id is not None:
                if not session_id:
                    return []
                for k, _ in scan_prefix(txn, self.renv.db("turn_session"), prefix(session_id)):
                    raw = txn.get(k.split(b"\x00", 1)[1], db=db)
                    if raw:
                        out.append(TurnRecord.model_validate(unpack(raw)))
                if state is not None:
                    out = [t for t in out if t.state.value == TurnState(state).value]
            elif state is not None:
                for k, _ in scan_prefix(txn, self.renv.db("turn_state"), prefix(TurnState(state).value)):
                    raw = txn.get(k.split(b"\x00", 1)[1], db=db)
                    if raw:
                        out.append(TurnRecord.model_validate(unpack(raw)))
            else:
                out = [TurnRecord.model_validate(unpack(v)) for _, v in txn.cursor(db=db)]
        out.sort(key=lambda t: (t.created_at, t.turn_id))
        return out

    def ensure_session_index(self) -> int:
        """Index every turn by session in a store written before the index existed (once, before the writer
        starts). Returns how many turns were indexed (0 when the index was already complete)."""
        while True:
            try:
                with self.renv.write_scope() as env, env.begin(write=True) as txn:
                    if txn.get(SESSION_INDEX, db=self.renv.db("meta")) is not None:
                        return 0
                    n = 0
                    sessions = self.renv.db("turn_session")
                    for k, v in txn.cursor(db=self.renv.db("turns")):
                        sid = str(unpack(v).get("session_id") or "")
                        try:
                            txn.put(key(sid, k.decode()), b"", db=sessions)
                        except BadRequest:  # not a session id a key can hold: never listed by session
                            log.warning("turn %r: session %r cannot be indexed", k[:40], sid[:40])
                            continue
                        n += 1
                    txn.put(SESSION_INDEX, b"1", db=self.renv.db("meta"))
                break
            except lmdb.MapFullError:
                if not self.renv.grow():
                    raise
        if n:
            log.info("indexed %d turn records by session", n)
        return n

    def delete_sessions(self, txn: Txn, session_ids: set[str]) -> None:
        """Drop pruned sessions' done turns (and their index entries), found through the session index."""
        db, idx, by_session = (self.renv.db(n) for n in ("turns", "turn_state", "turn_session"))
        for sid in session_ids:
            for k, _ in list(scan_prefix(txn, by_session, prefix(sid))):
                turn_key = k.split(b"\x00", 1)[1]
                raw = txn.get(turn_key, db=db)
                t = TurnRecord.model_validate(unpack(raw)) if raw else None
                if t is not None and t.state != TurnState.DONE:
                    continue
                if t is not None:
                    txn.delete(key(t.state.value, t.turn_id), db=idx)
                    txn.delete(turn_key, db=db)
                txn.delete(k, db=by_session)


def _told(stored: Callable[[TurnRecord], None], both: tuple[TurnRecord, dict[str, Any]]) -> dict[str, Any]:
    stored(both[0])
    return both[1]
