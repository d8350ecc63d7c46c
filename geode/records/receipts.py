"""Effect receipts: admitted → committed | uncertain → reconciled, with the quarantine rule of reference §4.6.

``admit`` is a read-check-write inside the single writer, so two admits of one operation id can never both
answer NEW. An admit retried with the same ``attempt`` token (a lost reply) gets the same NEW answer back.

A retried effect is a new receipt naming its predecessor (``after``): it is admitted only once the
predecessor is committed as known not applied with the time it may be retried (``{"posted": false,
"retry_at": T}``), or was uncertain and GEODE observed it not applied (reconciled ``not_applied`` by
observation; an operator's ``not_applied`` hands the effect to the operator and opens nothing), so the
attempts of one effect form a chain in which at most one can apply.
"""

from __future__ import annotations

import json
import time
from typing import Any

from geode.protocol.errors import Conflict, NotFound, Unavailable
from geode.records.lmdb_env import RecordEnv, Txn, key, pack, prefix, scan_prefix, unpack
from geode.records.models import (
    AdmitKind,
    AdmitResult,
    Observation,
    Receipt,
    ReceiptIdentity,
    ReceiptState,
)
from geode.records.settings import StoreConfig
from geode.records.writer import GroupWriter
from geode.redaction import bound, fingerprint

PERSONAL = "personal-data-redacted"
RESULT_MAX_BYTES = 32 * 1024
OUTCOMES = ("applied", "not_applied")
INTERRUPTED = "interrupted"  # a committed result whose content says GEODE stopped the command after it began
BY_OBSERVATION = "observation"


def bound_result(result: dict[str, Any] | None) -> dict[str, Any] | None:
    """Bounded copy of a tool result (32 KiB, 12,000-char strings, 128 items, depth 8)."""
    if result is None:
        return None
    out = bound(result, max_str=12000, max_items=128, max_depth=8)
    text = json.dumps(out, ensure_ascii=False, default=str)
    if len(text.encode()) > RESULT_MAX_BYTES:
        return {"truncated": True, "bytes": len(text.encode()), "preview": text[:8000]}
    return out if isinstance(out, dict) else {"value": out}


def committed_outcome(result: dict[str, Any] | None) -> str | None:
    """``interrupted`` when a committed result says GEODE stopped the command after it began, else None."""
    content = (result or {}).get("content")
    if isinstance(content, dict) and content.get("outcome") == INTERRUPTED:
        return INTERRUPTED
    return None


def retriable(prev: Receipt | None, ident: ReceiptIdentity) -> bool:
    """``prev`` (of the same identity) is committed as known not applied, with the time it may be retried,
    or reconciled ``not_applied`` by observation (looked for and not there)."""
    if prev is not None and prev.identity == ident and prev.state == ReceiptState.RECONCILED:
        return prev.outcome == "not_applied" and prev.reconciled_by == BY_OBSERVATION
    result = prev.result if prev is not None else None
    return (
        prev is not None
        and prev.identity == ident
        and prev.state == ReceiptState.COMMITTED
        and isinstance(result, dict)
        and result.get("posted") is False
        and isinstance(result.get("retry_at"), int | float)
    )


def _owner_incarnation(owner: str) -> tuple[str, int]:
    name, _, inc = owner.rpartition("#")
    try:
        return name, int(inc)
    except ValueError:
        return owner, -1


class ReceiptStore:
    def __init__(self, renv: RecordEnv, writer: GroupWriter, config: StoreConfig) -> None:
        self.renv = renv
        self.writer = writer
        self.config = config

    # helpers run inside a write transaction ---------------------------------------------------------
    def _get(self, txn: Txn, op_id: str) -> Receipt | None:
        raw = txn.get(key(op_id), db=self.renv.db("receipts"))
        return Receipt.model_validate(unpack(raw)) if raw else None

    def _put(self, txn: Txn, r: Receipt, old: Receipt | None) -> None:
        db_open, db_owner, db_done = (self.renv.db(n) for n in ("rc_open", "rc_owner", "rc_done"))
        sid, op = r.identity.session_id, r.operation_id
        if old is not None:
            txn.delete(key(old.owner, op), db=db_owner)
            txn.delete(key(int(old.updated_at * 1e9), op), db=db_done)
        if r.state in (ReceiptState.ADMITTED, ReceiptState.UNCERTAIN):
            txn.put(key(sid, op), r.identity.step_id.encode(), db=db_open)
        else:
            txn.delete(key(sid, op), db=db_open)
            txn.put(key(int(r.updated_at * 1e9), op), b"", db=db_done)
        if r.state == ReceiptState.ADMITTED:
            txn.put(key(r.owner, op), b"", db=db_owner)
        txn.put(key(op), pack(r.model_dump(mode="json")), db=self.renv.db("receipts"))

    # admit ------------------------------------------------------------------------------------------
    def admit(
        self,
        op_id: str,
        identity: ReceiptIdentity,
        *,
        owner: str,
        effect: str = "",
        attempt: str = "",
        observation: Observation | None = None,
        after: str = "",
    ) -> AdmitResult:
        """``observation``: what to look at to settle the effect if its outcome becomes unknown;
        ``after``: the receipt this one retries (see the module docstring)."""
        return self.writer.run(
            lambda txn: self._admit(txn, op_id, identity, owner, effect, attempt, observation, after)
        )

    def _admit(
        self,
        txn: Txn,
        op_id: str,
        ident: ReceiptIdentity,
        owner: str,
        effect: str,
        attempt: str,
        observation: Observation | None,
        after: str = "",
    ) -> AdmitResult:
        r = self._get(txn, op_id)
        if r is not None:
            if r.identity != ident or ident.fingerprint == PERSONAL:
                return AdmitResult(
                    kind=AdmitKind.CONFLICT, reason="operation id reused with a different identity"
                )
            if r.state == ReceiptState.COMMITTED:
                return AdmitResult(kind=AdmitKind.REPLAY, result=r.result, reason="committed earlier")
            if r.state == ReceiptState.RECONCILED:
                return AdmitResult(kind=AdmitKind.REPLAY, result=r.result, reason=f"reconciled: {r.outcome}")
            if r.state == ReceiptState.ADMITTED and attempt and r.attempt == attempt and r.owner == owner:
                return AdmitResult(kind=AdmitKind.NEW, reason="same admission (retried request)")
            why = r.uncertain_reason or "admitted earlier; the effect may have begun"
            return AdmitResult(kind=AdmitKind.UNCERTAIN, reason=why, blocking_operation=op_id)
        if after and not retriable(self._get(txn, after), ident):
            return AdmitResult(
                kind=AdmitKind.CONFLICT,
                reason=f"{after} is not known not posted (a retry time, or observed absent): no new attempt",
            )
        db_open = self.renv.db("rc_open")
        for k, step in scan_prefix(txn, db_open, prefix(ident.session_id)):
            if step.decode() != ident.step_id:
                blocker = k.rsplit(b"\x00", 1)[-1].decode()
                return AdmitResult(
                    kind=AdmitKind.UNCERTAIN,
                    reason=f"session has an unresolved receipt {blocker} from an earlier step; reconcile it",
                    blocking_operation=blocker,
                )
        if txn.stat(db_open)["entries"] >= self.config.max_unresolved_receipts:
            raise Unavailable(f"more than {self.config.max_unresolved_receipts} unresolved receipts")
        now = time.time()
        new = Receipt(
            operation_id=op_id,
            identity=ident,
            state=ReceiptState.ADMITTED,
            owner=owner,
            effect=effect,
            created_at=now,
            updated_at=now,
            attempt=attempt or None,
            observation=observation,
        )
        self._put(txn, new, None)
        return AdmitResult(kind=AdmitKind.NEW)

    # transitions ------------------------------------------------------------------------------------
    def commit(self, op_id: str, result: dict[str, Any]) -> Receipt:
        return self.writer.run(lambda txn: self._commit(txn, op_id, result))

    def _commit(self, txn: Txn, op_id: str, result: dict[str, Any]) -> Receipt:
        r = self._require(txn, op_id)
        stored = bound_result(result)
        if r.state == ReceiptState.COMMITTED:
            if fingerprint(r.result) == fingerprint(stored):
                return r
            raise Conflict(f"receipt {op_id} already committed with a different result")
        if r.state == ReceiptState.RECONCILED:
            raise Conflict(f"receipt {op_id} was reconciled by {r.reconciled_by}; it cannot be committed")
        update = {"state": ReceiptState.COMMITTED, "result": stored, "updated_at": time.time()}
        new = r.model_copy(update={**update, "outcome": committed_outcome(stored)})
        self._put(txn, new, r)
        return new

    def mark_uncertain(self, op_id: str, reason: str) -> Receipt:
        return self.writer.run(lambda txn: self._uncertain(txn, op_id, reason))

    def _uncertain(self, txn: Txn, op_id: str, reason: str) -> Receipt:
        r = self._require(txn, op_id)
        if r.state != ReceiptState.ADMITTED:
            return r
        new = r.model_copy(
            update={
                "state": ReceiptState.UNCERTAIN,
                "uncertain_reason": reason[:500],
                "updated_at": time.time(),
            }
        )
        self._put(txn, new, r)
        return new

    def reconcile(
        self, op_id: str, *, outcome: str, by: str, note: str = "", evidence: Observation | None = None
    ) -> Receipt:
        """An operator's verdict, or GEODE's by observation (``by="observation"`` with ``evidence``)."""
        return self.writer.run(lambda txn: self._reconcile(txn, op_id, outcome, by, note, evidence))

    def _reconcile(
        self, txn: Txn, op_id: str, outcome: str, by: str, note: str, evidence: Observation | None
    ) -> Receipt:
        outcome = outcome.replace("-", "_")
        if outcome not in OUTCOMES:
            raise Conflict(f"outcome must be applied or not_applied, not {outcome!r}")
        if (by == BY_OBSERVATION) != (evidence is not None and evidence.observed is not None):
            raise Conflict("a reconciliation by observation needs its evidence (and only it has one)")
        r = self._require(txn, op_id)
        if r.state == ReceiptState.RECONCILED:
            if r.outcome == outcome:
                return r
            raise Conflict(f"receipt {op_id} already reconciled as {r.outcome}")
        if r.state == ReceiptState.COMMITTED:
            raise Conflict(f"receipt {op_id} is committed; there is nothing to reconcile")
        now = time.time()
        result: dict[str, Any] = {
            "reconciled_by_operator": evidence is None,
            "external_effect_applied": outcome == "applied",
            "outcome": outcome,
            "by": by,
            "note": note[:2000],
        }
        if evidence is not None:
            result["evidence"] = evidence.model_dump(mode="json")
        new = r.model_copy(
            update={
                "state": ReceiptState.RECONCILED,
                "outcome": outcome,
                "reconciled_by": by,
                "note": note[:2000] or None,
                "reconciled_at": now,
                "updated_at": now,
                "result": result,
                "observation": evidence or r.observation,
            }
        )
        self._put(txn, new, r)
        return new

    def owner_died(self, name: str, incarnation: int) -> int:
        """Every admitted receipt of ``name`` at incarnation ≤ ``incarnation`` becomes uncertain."""
        return self.writer.run(lambda txn: self._owner_died(txn, name, incarnation))

    def _owner_died(self, txn: Txn, name: str, incarnation: int) -> int:
        db_owner = self.renv.db("rc_owner")
        victims: list[str] = []
        for k, _ in scan_prefix(txn, db_owner, f"{name}#".encode()):
            owner, _, op = k.partition(b"\x00")
            oname, inc = _owner_incarnation(owner.decode())
            if oname == name and 0 <= inc <= incarnation:
                victims.append(op.decode())
        for op_id in victims:
            self._uncertain(txn, op_id, f"owner {name}#{incarnation} died with the effect admitted")
        return len(victims)

    def _require(self, txn: Txn, op_id: str) -> Receipt:
        r = self._get(txn, op_id)
        if r is None:
            raise NotFound(f"no receipt {op_id}")
        return r

    # pruning ----------------------------------------------------------------------------------------
    def prune(self, now: float | None = None) -> int:
        return self.writer.run(lambda txn: self._prune(txn, now or time.time()))

    def _prune(self, txn: Txn, now: float) -> int:
        db_done = self.renv.db("rc_done")
        total = txn.stat(db_done)["entries"]
        cutoff = int((now - self.config.receipt_retention_days * 86400) * 1e9)
        excess = max(0, total - self.config.receipt_keep)
        doomed: list[bytes] = []
        for k, _ in txn.cursor(db=db_done):  # oldest first
            ts = int.from_bytes(k[:8], "big")
            if len(doomed) >= excess and ts >= cutoff:
                break
            doomed.append(k)
        for k in doomed:
            txn.delete(k, db=db_done)
            txn.delete(k[9:], db=self.renv.db("receipts"))
        return len(doomed)

    # reads ------------------------------------------------------------------------------------------
    def get(self, op_id: str) -> Receipt | None:
        with self.renv.read() as txn:
            return self._get(txn, op_id)

    def list(
        self, *, session_id: str | None = None, uncertain_only: bool = False, limit: int = 200
    ) -> list[Receipt]:
        out: list[Receipt] = []
        with self.renv.read() as txn:
            if uncertain_only or session_id is not None:
                ops = []
                if uncertain_only:
                    pfx = prefix(session_id) if session_id else b""
                    ops = [
                        k.rsplit(b"\x00", 1)[-1] for k, _ in scan_prefix(txn, self.renv.db("rc_open"), pfx)
                    ]
                    rows = [self._get(txn, op.decode()) for op in ops]
                    out = [r for r in rows if r is not None and r.state == ReceiptState.UNCERTAIN]
                else:
                    for _, v in txn.cursor(db=self.renv.db("receipts")):
                        r = Receipt.model_validate(unpack(v))
                        if r.identity.session_id == session_id:
                            out.append(r)
            else:
                out = [Receipt.model_validate(unpack(v)) for _, v in txn.cursor(db=self.renv.db("receipts"))]
        out.sort(key=lambda r: r.updated_at, reverse=True)
        return out[:limit]

    def open_counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        with self.renv.read() as txn:
            for k, _ in txn.cursor(db=self.renv.db("rc_open")):
                sid = k.rsplit(b"\x00", 1)[0].decode()
                counts[sid] = counts.get(sid, 0) + 1
        return counts

    def delete_sessions(self, txn: Txn, session_ids: set[str]) -> None:
        """Drop pruned sessions' resolved receipts in one scan (unresolved ones are kept for the operator)."""
        done = (ReceiptState.COMMITTED, ReceiptState.RECONCILED)
        for r in [Receipt.model_validate(unpack(v)) for _, v in txn.cursor(db=self.renv.db("receipts"))]:
            if r.identity.session_id in session_ids and r.state in done:
                txn.delete(key(int(r.updated_at * 1e9), r.operation_id), db=self.renv.db("rc_done"))
                txn.delete(key(r.operation_id), db=self.renv.db("receipts"))
