"""Messenger cursors per (platform, account, channel) and dedupe keys with a time to live."""

from __future__ import annotations

import time

from geode.protocol.later import Later
from geode.records.lmdb_env import RecordEnv, Txn, key, pack, unpack
from geode.records.writer import WRITE_TIMEOUT_S, GroupWriter


class CursorStore:
    def __init__(self, renv: RecordEnv, writer: GroupWriter) -> None:
        self.renv = renv
        self.writer = writer

    # cursors ----------------------------------------------------------------------------------------
    def get(self, platform: str, account: str, channel: str) -> str | None:
        with self.renv.read() as txn:
            raw = txn.get(key(platform, account, channel), db=self.renv.db("cursors"))
        return raw.decode() if raw is not None else None

    def set(self, platform: str, account: str, channel: str, position: str) -> None:
        self.set_later(platform, account, channel, position).result(WRITE_TIMEOUT_S)

    def set_later(self, platform: str, account: str, channel: str, position: str) -> Later:
        """:meth:`set` without waiting: a ``Later`` completed after the sync commit."""
        k = key(platform, account, channel)
        return self.writer.submit(lambda txn: txn.put(k, position.encode(), db=self.renv.db("cursors")))

    # dedupe -----------------------------------------------------------------------------------------
    def dedupe(self, dkey: str, *, ttl_s: float, token: str = "") -> bool:
        """True the first time ``dkey`` is seen within its TTL (or again for the same ``token``: a retry)."""
        return bool(self.dedupe_later(dkey, ttl_s=ttl_s, token=token).result(WRITE_TIMEOUT_S))

    def dedupe_later(self, dkey: str, *, ttl_s: float, token: str = "") -> Later:
        """:meth:`dedupe` without waiting: a ``Later`` of the bool, completed after the sync commit."""
        return self.writer.submit(lambda txn: self._dedupe(txn, dkey, ttl_s, token))

    def _dedupe(self, txn: Txn, dkey: str, ttl_s: float, token: str) -> bool:
        db, exp_db = self.renv.db("dedupe"), self.renv.db("dd_exp")
        k = key(dkey)
        now = time.time()
        raw = txn.get(k, db=db)
        if raw is not None:
            old = unpack(raw)
            if old["expires"] > now:
                return bool(token) and old.get("token") == token
            txn.delete(key(int(old["expires"] * 1e9), dkey), db=exp_db)
        expires = now + max(0.0, ttl_s)
        txn.put(k, pack({"expires": expires, "token": token}), db=db)
        txn.put(key(int(expires * 1e9), dkey), b"", db=exp_db)
        self._expire(txn, now, limit=64)
        return True

    def _expire(self, txn: Txn, now: float, *, limit: int) -> int:
        """Drop up to ``limit`` expired keys (amortised on every dedupe write)."""
        db, exp_db = self.renv.db("dedupe"), self.renv.db("dd_exp")
        doomed: list[bytes] = []
        for k, _ in txn.cursor(db=exp_db):
            if int.from_bytes(k[:8], "big") > now * 1e9 or len(doomed) >= limit:
                break
            doomed.append(k)
        for k in doomed:
            txn.delete(k, db=exp_db)
            txn.delete(k[9:], db=db)
        return len(doomed)

    def expire(self) -> int:
        return self.writer.run(lambda txn: self._expire(txn, time.time(), limit=100000))
