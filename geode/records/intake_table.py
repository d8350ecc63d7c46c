"""The webhook intake table in the record store: one row per accepted delivery, written before its 2xx.

Every write is one function run by the single writer in one transaction. ``record`` is a compare-and-set on
(route, dedupe key): a fresh earlier intake answers ``replayed`` (nothing written); else the route's open
counter (recorded|submitted) against its queue bound answers ``full`` (nothing written); else the row, its
indexes and the counter in the same transaction. States only move forward (recorded → submitted → answered
→ done), so every step is idempotent. A full map is :class:`StoreFull`: nothing of the write stays.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from geode.protocol.errors import BadRequest, Unavailable
from geode.protocol.later import Later
from geode.records import intake_views as views
from geode.records.clocked_table import ClockedTable
from geode.records.intake_models import (
    ID_MAX,
    REASON_MAX,
    IntakeConflict,
    IntakeCounts,
    IntakePage,
    IntakeRow,
    RecordResult,
    StoreFull,
    rank,
    utc_key,
)
from geode.records.intake_views import DEDUPE, DONE, PENDING, RECV, ROUTES, ROWS, TURNS
from geode.records.lmdb_env import Txn, key, pack, unpack
from geode.records.writer import MAP_FULL
from geode.redaction import redact_text
from geode.webhooks.ids import delivery_turn_id

HEADER_NAME_MAX, HEADER_VALUE_MAX = 128, 4096
PRUNE_BATCH = 500  # rows dropped per write transaction by the retention pass


class IntakeTable(ClockedTable):
    """The table on the store's environment. ``clock`` (seconds since the epoch) stamps rows and judges the
    dedupe window; tests replace it."""

    def _submit(self, fn: Callable[[Txn], Any]) -> Later:
        """Queue ``fn`` for the writer; a full map fails the Later with :class:`StoreFull` (by name)."""
        out = Later()

        def settle(ok: bool, value: Any) -> None:
            if ok:
                out.resolve(value)
                return
            if isinstance(value, Unavailable) and MAP_FULL in value.message:
                value = StoreFull(value.message)
            out.fail(value)

        self.writer.submit(fn).then(settle)
        return out

    # record -----------------------------------------------------------------------------------------
    def record_later(
        self,
        route: str,
        dedupe_key: str,
        *,
        window_s: float | None,
        queue_max: int,
        headers: dict[str, str],
        body: bytes,
        client: str,
        origin: str = "sender",
        replay_of: str = "",
        attempt: str = "",
    ) -> Later:
        """The compare-and-set of one delivery: a :class:`RecordResult` after the commit."""
        _check_headers(headers)
        row = dict(headers=headers, body=body, client=client, origin=origin, replay_of=replay_of)
        return self._submit(
            lambda txn: self._record(txn, route, dedupe_key, window_s, queue_max, row, attempt)
        )

    def _record(
        self,
        txn: Txn,
        route: str,
        dedupe_key: str,
        window_s: float | None,
        queue_max: int,
        fields: dict[str, Any],
        attempt: str,
    ) -> RecordResult:
        now = self.now()
        meta = views.route_meta(txn, self._dbs(), route)
        dkey = key(route, dedupe_key)
        raw = txn.get(dkey, db=self._db(DEDUPE))
        entry = unpack(raw) if raw else None
        n = 0
        if entry is not None:
            n = int(entry.get("n", 0))
            old = self._row(txn, route, entry["d"])
            if old is not None:
                if attempt and entry.get("a") == attempt:  # this very call's retry: the same answer
                    return RecordResult(row=old, open=meta["open"])
                fresh = window_s is None or (now - old.received_at).total_seconds() < window_s
                if fresh:
                    return RecordResult(row=old, replayed=True, open=meta["open"])
                n += 1
        if meta["open"] >= queue_max:
            return RecordResult(full=True, open=meta["open"])
        delivery_id = dedupe_key if n == 0 else f"{dedupe_key}.{n}"
        while self._row(txn, route, delivery_id) is not None:  # a stale window's id taken by another key
            n += 1
            delivery_id = f"{dedupe_key}.{n}"
        body: bytes = fields["body"]
        row = IntakeRow(
            route=route,
            delivery_id=delivery_id,
            dedupe_key=dedupe_key,
            turn_id=delivery_turn_id(route, delivery_id),
            received_at=now,
            body_sha256=hashlib.sha256(body).hexdigest(),
            updated_at=now,
            **fields,
        )
        rk = key(route, delivery_id)
        txn.put(rk, pack(row.model_dump(mode="json")), db=self._db(ROWS))
        txn.put(dkey, pack({"d": delivery_id, "n": n, "a": attempt}), db=self._db(DEDUPE))
        txn.put(key(row.turn_id), rk, db=self._db(TURNS))
        txn.put(rk, b"", db=self._db(PENDING))
        txn.put(key(utc_key(now), route, delivery_id), b"", db=self._db(RECV))
        meta["open"] += 1
        meta["states"]["recorded"] = meta["states"].get("recorded", 0) + 1
        if window_s is not None:
            meta["window_s"] = max(window_s, meta.get("window_s") or 0.0)
        self._put_meta(txn, route, meta)
        return RecordResult(row=row, open=meta["open"])

    def replay_later(self, delivery_id: str, *, route: str, queue_max: int, client: str) -> Later:
        """Re-run a stored delivery as a new intake ``<old>.replay-<n>`` (origin ``replay``, its body and
        kept headers copied), under the route's queue bound: a :class:`RecordResult`."""
        return self._submit(lambda txn: self._replay(txn, delivery_id, route, queue_max, client))

    def _replay(self, txn: Txn, delivery_id: str, route: str, queue_max: int, client: str) -> RecordResult:
        routes = [route] if route else views.routes_holding(txn, self._dbs(), delivery_id)
        if len(routes) > 1:
            raise IntakeConflict(f"{delivery_id} is a delivery of {', '.join(routes)}: name the route")
        src = self._row(txn, routes[0], delivery_id) if routes else None
        if src is None:
            where = f" of route {route}" if route else ""
            raise IntakeConflict(f"no stored delivery {delivery_id}{where}")
        n = 1
        while self._row(txn, src.route, f"{delivery_id}.replay-{n}") is not None:
            n += 1
        if len(f"{delivery_id}.replay-{n}") > ID_MAX:
            raise IntakeConflict(f"{delivery_id[:60]}…: its replay's id would pass {ID_MAX} characters")
        fields = dict(
            headers=src.headers, body=src.body, client=client, origin="replay", replay_of=delivery_id
        )
        return self._record(txn, src.route, f"{delivery_id}.replay-{n}", None, queue_max, fields, "")

    # state steps ------------------------------------------------------------------------------------
    def submitted_later(self, route: str, delivery_id: str) -> Later:
        """Lanes acknowledged the intake's turn (a repeat, or a later state, is a no-op)."""
        return self._submit(lambda txn: self._step(txn, route, delivery_id, "submitted", {}))

    def answered_later(
        self, route: str, delivery_id: str, termination_reason: str, answer_chars: int
    ) -> Later:
        """The intake's turn ended: it leaves the route's queue (open - 1)."""
        update = {"termination_reason": _reason(termination_reason), "answer_chars": answer_chars}
        return self._submit(lambda txn: self._step(txn, route, delivery_id, "answered", update))

    def done_later(self, route: str, delivery_id: str, delivery: str, reason: str) -> Later:
        """The intake is finished, with its answer's delivery word; the first ``done`` stays."""
        update = {"delivery": delivery, "delivery_reason": _reason(reason)}
        return self._submit(lambda txn: self._step(txn, route, delivery_id, "done", update))

    def _step(self, txn: Txn, route: str, delivery_id: str, state: str, update: dict[str, Any]) -> IntakeRow:
        row = self._row(txn, route, delivery_id)
        if row is None:
            raise IntakeConflict(f"no intake {delivery_id} of route {route}")
        if rank(row.state) >= rank(state):
            return row  # a retried step, or one the intake is already past
        now = self.now()
        rk = key(route, delivery_id)
        meta = views.route_meta(txn, self._dbs(), route)
        states = meta["states"]
        states[row.state] = max(0, states.get(row.state, 0) - 1)
        states[state] = states.get(state, 0) + 1
        if row.open and rank(state) >= rank("answered"):
            meta["open"] = max(0, meta["open"] - 1)
        if state == "done":
            txn.delete(rk, db=self._db(PENDING))
            txn.put(key(utc_key(now), route, delivery_id), b"", db=self._db(DONE))
        self._put_meta(txn, route, meta)
        row = row.model_copy(update={**update, "state": state, "updated_at": now})
        txn.put(rk, pack(row.model_dump(mode="json")), db=self._db(ROWS))
        return row

    # reads ------------------------------------------------------------------------------------------
    def _dbs(self) -> views.Dbs:
        return views.handles(self.renv)

    def _row(self, txn: Txn, route: str, delivery_id: str) -> IntakeRow | None:
        return views.row(txn, self._dbs(), route, delivery_id)

    def _put_meta(self, txn: Txn, route: str, meta: dict[str, Any]) -> None:
        txn.put(key(route), pack(meta), db=self._db(ROUTES))

    def get(self, route: str, delivery_id: str) -> IntakeRow | None:
        with self.renv.read() as txn:
            return self._row(txn, route, delivery_id)

    def by_turn(self, turn_id: str) -> IntakeRow | None:
        with self.renv.read() as txn:
            return views.by_turn(txn, self._dbs(), turn_id)

    def open_page(self, after: str = "") -> IntakePage:
        """Intakes not done yet, with their bodies, a page at a time (one reply frame)."""
        with self.renv.read() as txn:
            return views.pending(txn, self._dbs(), after)

    def recent(
        self, route: str | None = None, limit: int = 50, *, with_body: bool = False
    ) -> list[IntakeRow]:
        with self.renv.read() as txn:
            return views.recent(txn, self._dbs(), route, limit, with_body)

    def counts(self) -> IntakeCounts:
        with self.renv.read() as txn:
            return views.counts(txn, self._dbs())

    # retention --------------------------------------------------------------------------------------
    def retention_s(self, route: str) -> float:
        """How long a done intake of ``route`` is kept: ``webhook_retention_days``, or the route's dedupe
        window when longer (a delivery is deduped for its whole window)."""
        with self.renv.read() as txn:
            window = views.route_meta(txn, self._dbs(), route)["window_s"] or 0.0
        return max(self.config.webhook_retention_days * 86400, float(window))

    def prune(self) -> int:
        """Drop done intakes finished longer ago than their route's :meth:`retention_s` (with indexes)."""
        now = self.clock()
        base = utc_key(datetime.fromtimestamp(now - self.config.webhook_retention_days * 86400, UTC))
        total = 0
        while True:
            dropped = int(self.writer.run(lambda txn: self._prune(txn, now, base)))
            total += dropped
            if dropped < PRUNE_BATCH:
                return total

    def _prune(self, txn: Txn, now: float, base: str) -> int:
        metas: dict[str, dict[str, Any]] = {}
        doomed: list[tuple[bytes, str, str]] = []
        for k, _v in views.done_before(txn, self._dbs(), base):
            at, route, delivery_id = k.decode().split("\x00")
            meta = metas.get(route) or views.route_meta(txn, self._dbs(), route)
            metas[route] = meta
            window = float(meta["window_s"] or 0.0)
            if window and at >= utc_key(datetime.fromtimestamp(now - window, UTC)):
                continue  # still inside the route's dedupe window
            doomed.append((k, route, delivery_id))
            if len(doomed) >= PRUNE_BATCH:
                break
        for k, route, delivery_id in doomed:  # deleted after the scan: the cursor is not moved under us
            txn.delete(k, db=self._db(DONE))
            row = self._row(txn, route, delivery_id)
            if row is None:
                continue
            rk = key(route, delivery_id)
            txn.delete(rk, db=self._db(ROWS))
            txn.delete(key(row.turn_id), db=self._db(TURNS))
            txn.delete(key(utc_key(row.received_at), route, delivery_id), db=self._db(RECV))
            dkey = key(route, row.dedupe_key)
            raw = txn.get(dkey, db=self._db(DEDUPE))
            if raw is not None and unpack(raw).get("d") == delivery_id:
                txn.delete(dkey, db=self._db(DEDUPE))
            states = metas[route]["states"]
            states["done"] = max(0, states.get("done", 0) - 1)
            self._put_meta(txn, route, metas[route])
        return len(doomed)


def _reason(text: str) -> str:
    return redact_text(text, REASON_MAX).replace("\r", " ").replace("\n", " ")


def _check_headers(headers: dict[str, str]) -> None:
    for name, value in headers.items():
        if not 0 < len(name) <= HEADER_NAME_MAX or len(value) > HEADER_VALUE_MAX:
            raise BadRequest(
                f"kept header {name[:40]!r}: names are 1-{HEADER_NAME_MAX} and values at most "
                f"{HEADER_VALUE_MAX} characters"
            )
