"""Turn records keyed by a caller-chosen turn id: queued → running (worker, incarnation) → done (outcome).

``put`` is idempotent: re-putting a record never regresses a turn that is already done, and keeps the
original ``created_at``. The store stamps ``updated_at``.
"""

from __future__ import annotations

import time

from geode.protocol.later import Later
from geode.records.lmdb_env import RecordEnv, Txn, key, pack, prefix, scan_prefix, unpack
from geode.records.models import TurnRecord, TurnState
from geode.records.writer import GroupWriter


class TurnStore:
    def __init__(self, renv: RecordEnv, writer: GroupWriter) -> None:
        self.renv = renv
        self.writer = writer

    def put(self, turn: TurnRecord) -> TurnRecord:
        return self.writer.run(lambda txn: self._put(txn, turn))

    def put_later(self, turn: TurnRecord) -> Later:
        """:meth:`put` without waiting: a ``Later`` of the stored record, completed after the sync commit."""
        return self.writer.submit(lambda txn: self._put(txn, turn))

    def _put(self, txn: Txn, turn: TurnRecord) -> TurnRecord:
        db, idx = self.renv.db("turns"), self.renv.db("turn_state")
        raw = txn.get(key(turn.turn_id), db=db)
        old = TurnRecord.model_validate(unpack(raw)) if raw else None
        if old is not None and old.state == TurnState.DONE:
            return old
        now = time.time()
        new = turn.model_copy(
            update={"created_at": old.created_at if old else (turn.created_at or now), "updated_at": now}
        )
        if old is not None:
            txn.delete(key(old.state.value, old.turn_id), db=idx)
        txn.put(key(new.state.value, new.turn_id), b"", db=idx)
        txn.put(key(new.turn_id), pack(new.model_dump(mode="json")), db=db)
        return new

    def get(self, turn_id: str) -> TurnRecord | None:
        with self.renv.read() as txn:
            raw = txn.get(key(turn_id), db=self.renv.db("turns"))
        return TurnRecord.model_validate(unpack(raw)) if raw else None

    def list(
        self, *, state: str | None = None, session_id: str | None = None, limit: int = 1000
    ) -> list[TurnRecord]:
        out: list[TurnRecord] = []
        with self.renv.read() as txn:
            db = self.renv.db("turns")
            if state is not None:
                for k, _ in scan_prefix(txn, self.renv.db("turn_state"), prefix(TurnState(state).value)):
                    raw = txn.get(k.split(b"\x00", 1)[1], db=db)
                    if raw:
                        out.append(TurnRecord.model_validate(unpack(raw)))
            else:
                out = [TurnRecord.model_validate(unpack(v)) for _, v in txn.cursor(db=db)]
        if session_id is not None:
            out = [t for t in out if t.session_id == session_id]
        out.sort(key=lambda t: (t.created_at, t.turn_id))
        return out

    def delete_sessions(self, txn: Txn, session_ids: set[str]) -> None:
        """Drop pruned sessions' done turns in one scan."""
        db, idx = self.renv.db("turns"), self.renv.db("turn_state")
        for k, v in list(txn.cursor(db=db)):
            t = TurnRecord.model_validate(unpack(v))
            if t.session_id in session_ids and t.state == TurnState.DONE:
                txn.delete(key(t.state.value, t.turn_id), db=idx)
                txn.delete(k, db=db)
