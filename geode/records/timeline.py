"""Timeline: an append-only, per-session observation log; idempotent by event id; hash-checked on read.

Payloads are redacted and bounded before they are written. Rows whose stored payload no longer matches its
hash come back with ``corrupt=True`` and an empty payload. The loop never reads the timeline back as state.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import Any

from geode.protocol.errors import BadRequest, Conflict
from geode.protocol.later import Later
from geode.records.lmdb_env import MAX_KEY, RecordEnv, Txn, key, pack, prefix, scan_prefix, u64, unpack
from geode.records.models import TimelineEvent, TimelineRow
from geode.records.writer import WRITE_TIMEOUT_S, GroupWriter
from geode.redacted_json import redacted_json
from geode.redaction import canonical_plain_json
from geode.work_tally import TIMELINE_APPEND
from geode.work_tally import count as tally

SCHEMA = "geode.timeline@1"


def bounded_payload(payload: dict[str, Any], max_bytes: int) -> str:
    """The redacted, bounded payload as canonical JSON text."""
    text = redacted_json(payload, max_str=16384, max_items=256, max_depth=12)  # most: no walk, one screen
    size = len(text) if text.isascii() else len(text.encode())
    if size > max_bytes:
        text = canonical_plain_json({"truncated": True, "bytes": size, "preview": text[:4096]})
    return text


def _hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class TimelineStore:
    def __init__(self, renv: RecordEnv, writer: GroupWriter, max_payload: int) -> None:
        self.renv = renv
        self.writer = writer
        self.max_payload = max_payload

    def append(self, event: TimelineEvent) -> int:
        """Append (or find the existing row of) an event; returns its seq within the session."""
        seq: int = self.append_later(event).result(WRITE_TIMEOUT_S)
        return seq

    def append_later(self, event: TimelineEvent, reply: Callable[[int], Any] | None = None) -> Later:
        """:meth:`append` without waiting: a ``Later`` of the seq (or of ``reply(seq)``: a request's reply
        made in the write, no second ``Later`` to map it), completed after the sync commit."""
        text = bounded_payload(event.payload, self.max_payload)
        if reply is None:
            return self.writer.submit(lambda txn: self._append(txn, event, text))
        return self.writer.submit(lambda txn: reply(self._append(txn, event, text)))

    def _append(self, txn: Txn, ev: TimelineEvent, text: str, last: dict[str, int] | None = None) -> int:
        """Write the row (or find the one stored with its event id); its seq. ``last``: the last seq of each
        session a new row of this write took (read, then kept up to date: several rows of one write look
        the session's last seq up once, not once each)."""
        tally(TIMELINE_APPEND)
        sid = ev.session_id
        h = _hash(text)
        ids = self.renv.db("tl_ids")
        db = self.renv.db("timeline")
        id_key = key(sid, ev.event_id)
        seen = txn.get(id_key, db=ids)
        if seen is not None:
            seq = u64(seen)
            raw = txn.get(key(sid, seq), db=db)
            old = unpack(raw) if raw else {}
            if old.get("kind") == ev.kind[:128] and old.get("payload_hash") == h:
                return seq
            raise Conflict(f"timeline event {ev.event_id} of {sid} already stored with different content")
        known = last.get(sid) if last is not None else None
        pfx = prefix(sid)
        seq = (self._last_seq(txn, sid, pfx) if known is None else known) + 1
        row_key = pfx + seq.to_bytes(8, "big")  # key(sid, seq) without its call (its bound checked here)
        if len(row_key) > MAX_KEY:
            raise BadRequest(f"record key of {len(row_key)} bytes is empty or longer than {MAX_KEY}")
        row = {
            "schema": SCHEMA,
            "session_id": sid,
            "event_id": ev.event_id,
            "kind": ev.kind[:128],
            "ts": ev.ts,
            "payload_json": text,
            "payload_hash": h,
        }
        txn.put(row_key, pack(row), db=db)
        txn.put(id_key, seq.to_bytes(8, "big"), db=ids)
        if last is not None:
            last[sid] = seq
        return seq

    def _last_seq(self, txn: Txn, sid: str, pfx: bytes) -> int:
        """The session's last seq (0 for none); ``pfx`` is ``prefix(sid)``."""
        cur = txn.cursor(db=self.renv.db("timeline"))
        positioned = cur.set_range(pfx[:-1] + b"\x01")  # just past every key(sid, ...)
        if not (cur.prev() if positioned else cur.last()):
            return 0
        k = cur.key()
        return u64(k) if len(k) == len(pfx) + 8 and k.startswith(pfx) else 0

    def read(self, session_id: str, *, after_seq: int = 0, limit: int = 10000) -> list[TimelineRow]:
        out: list[TimelineRow] = []
        with self.renv.read() as txn:
            for k, v in scan_prefix(txn, self.renv.db("timeline"), prefix(session_id)):
                seq = u64(k)
                if seq <= after_seq:
                    continue
                out.append(self._row(session_id, seq, v))
                if len(out) >= limit:
                    break
        return out

    @staticmethod
    def _row(session_id: str, seq: int, raw: bytes) -> TimelineRow:
        try:
            row = unpack(raw)
            text = row["payload_json"]
            corrupt = _hash(text) != row["payload_hash"]
            payload = {} if corrupt else json.loads(text)
            event = TimelineEvent(
                session_id=session_id,
                event_id=row["event_id"],
                kind=row["kind"],
                ts=row["ts"],
                payload=payload,
            )
            return TimelineRow(event=event, seq=seq, payload_hash=row["payload_hash"], corrupt=corrupt)
        except Exception:
            event = TimelineEvent(session_id=session_id, event_id=f"corrupt-{seq}", kind="corrupt", ts=0.0)
            return TimelineRow(event=event, seq=seq, payload_hash="", corrupt=True)

    def export_jsonl(self, session_id: str) -> str:
        """The session's timeline as JSON lines (one row per line, ``corrupt`` flagged)."""
        lines = [json.dumps(r.model_dump(mode="json"), ensure_ascii=False) for r in self.read(session_id)]
        return "".join(line + "\n" for line in lines)

    def delete_session(self, txn: Txn, session_id: str) -> None:
        for name in ("timeline", "tl_ids"):
            db = self.renv.db(name)
            for k, _ in list(scan_prefix(txn, db, prefix(session_id))):
                txn.delete(k, db=db)
