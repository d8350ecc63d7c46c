"""Evidence ledger: one append-only JSONL file per session under ``$GEODE_HOME/evidence/``.

Rows are redacted and carry the sha256 of their payload. Writing is best-effort: a failure never raises to
the caller; it is counted in ``failures`` (and the last error kept for ``store.stats``).
"""

from __future__ import annotations

import json
import os
import re
import threading
import time
from pathlib import Path
from typing import Any

from geode.redaction import fingerprint, redact, redact_text

SCHEMA_VERSION = 2
_SAFE = re.compile(r"[^A-Za-z0-9._-]")


def ledger_name(session_id: str) -> str:
    """A file-system-safe name for a session id."""
    name = _SAFE.sub("_", session_id)[:120] or "_"
    return name if name not in (".", "..") else "_"


class EvidenceLedger:
    def __init__(self, evidence_dir: Path) -> None:
        self.dir = Path(evidence_dir)
        self.failures = 0
        self.written = 0
        self.last_error = ""
        self._seq: dict[str, int] = {}
        self._lock = threading.Lock()

    def path(self, session_id: str) -> Path:
        return self.dir / f"{ledger_name(session_id)}.jsonl"

    def append(
        self,
        session_id: str,
        kind: str,
        payload: dict[str, Any] | None = None,
        *,
        turn_id: str = "",
        call_id: str = "",
        summary: str = "",
        component: str = "agentic_loop",
    ) -> bool:
        """Append one row; False (and counted) when it could not be written."""
        try:
            clean = redact(payload or {})
            with self._lock:
                seq = self._next_seq(session_id)
                row = {
                    "schema_version": SCHEMA_VERSION,
                    "ts": time.time(),
                    "seq": seq,
                    "session_id": session_id,
                    "turn_id": turn_id,
                    "call_id": call_id,
                    "component": component,
                    "level": "info",
                    "kind": kind[:128],
                    "summary": redact_text(summary, 500),
                    "payload_hash": fingerprint(clean),
                    "payload": clean,
                }
                line = json.dumps(row, ensure_ascii=False, default=str) + "\n"
                self.dir.mkdir(parents=True, exist_ok=True, mode=0o700)
                fd = os.open(self.path(session_id), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
                with open(fd, "a", encoding="utf-8") as f:
                    f.write(line)
                self._seq[session_id] = seq
                self.written += 1
            return True
        except Exception as exc:  # best-effort by contract
            self.failures += 1
            self.last_error = f"{type(exc).__name__}: {exc}"[:300]
            return False

    def _next_seq(self, session_id: str) -> int:
        if session_id not in self._seq:
            try:
                with open(self.path(session_id), "rb") as f:
                    self._seq[session_id] = sum(1 for _ in f)
            except FileNotFoundError:
                self._seq[session_id] = 0
        return self._seq[session_id] + 1

    def read(self, session_id: str) -> list[dict[str, Any]]:
        """Rows of a session's ledger, each with ``hash_ok`` (payload hash re-checked)."""
        out = []
        try:
            with open(self.path(session_id), encoding="utf-8") as f:
                for line in f:
                    try:
                        row = json.loads(line)
                        row["hash_ok"] = fingerprint(row.get("payload")) == row.get("payload_hash")
                    except json.JSONDecodeError:
                        row = {"corrupt": True, "hash_ok": False}
                    out.append(row)
        except FileNotFoundError:
            pass
        return out

    def stats(self) -> dict[str, Any]:
        return {"written": self.written, "failures": self.failures, "last_error": self.last_error}
