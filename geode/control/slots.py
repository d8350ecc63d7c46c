"""The control socket's connection slots: bounded, and connections that never handshake cannot hold them.

A connection gets ``handshake_deadline_s`` from its first frame (its pings do not extend it); past that it
is dropped and its routing id remembered, so its later frames are refused (a handshake re-admits it). When
the table is full, the oldest connection that never sent a handshake is evicted first, then idle ones.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from geode.control.connection import Connection, ConnState
from geode.control.session_index import SessionIndex
from geode.protocol.errors import Overloaded

MAX_CONNECTIONS = 256
MAX_EXPIRED = 4096  # routing ids dropped for a missed handshake, remembered so their traffic stays ignored


class SlotTable:
    """Connections by routing id. Times are passed in (the core's clock), so tests can drive them."""

    def __init__(self) -> None:
        self.conns: dict[str, Connection] = {}
        self.expired: OrderedDict[str, None] = OrderedDict()
        self.mu = threading.Lock()
        self.dropped_unready = 0  # connections dropped for a missed handshake or evicted before one
        # session id -> attached connections (kept by Connection.attach)
        self.index: SessionIndex[Connection] = SessionIndex()

    def get(self, conn_id: str, now: float, *, limit: int, idle_s: float) -> Connection:
        """The connection of ``conn_id``, created if new; ``Overloaded`` when no slot can be freed."""
        gone: list[Connection] = []
        try:
            with self.mu:
                conn = self.conns.get(conn_id)
                if conn is None or conn.state is ConnState.CLOSED:
                    if conn is not None:
                        gone.append(conn)
                    if len(self.conns) >= limit:
                        gone += self._evict_locked(now, idle_s)
                        if len(self.conns) >= limit:
                            raise Overloaded("too many control connections")
                    conn = Connection(conn_id, last_seen=now, created=now, index=self.index)
                    self.conns[conn_id] = conn
                return conn
        finally:
            self._unindex(gone)

    def is_expired(self, conn_id: str, *, readmit: bool = False) -> bool:
        """Whether a routing id was dropped for a missed handshake; a handshake (``readmit``) lifts it, so a
        CLI idling across a control restart can still re-attach, while pings alone never earn a slot."""
        with self.mu:
            if readmit:
                self.expired.pop(conn_id, None)
            return conn_id in self.expired

    def pop(self, conn_id: str) -> Connection | None:
        with self.mu:
            conn = self.conns.pop(conn_id, None)
        self._unindex([conn] if conn is not None else [])
        return conn

    def attached_to(self, session_id: str) -> list[Connection]:
        """The connections in the table attached to ``session_id`` (an index read, not a scan of the table).
        One the table no longer holds (a job still attaching it after it left) is dropped from the index."""
        out = []
        for k in self.index.attached_to(session_id):
            if self.conns.get(k.conn_id) is k:
                out.append(k)
            else:
                self.index.discard(session_id, k)
        return out

    def _unindex(self, conns: list[Connection]) -> None:
        """Connections that left the table leave the session index (never under ``mu``: takes their locks)."""
        for k in conns:
            with k.lock:
                self.index.drop(k, list(k.attached))

    def snapshot(self) -> list[Connection]:
        with self.mu:
            return list(self.conns.values())

    def expire_late(self, now: float, *, deadline_s: float, idle_s: float) -> list[str]:
        """Drop connections still without a handshake past the deadline (a failed handshake leaves one NEW:
        it goes after the idle timeout). Returns their ids."""
        with self.mu:
            late = [
                cid
                for cid, k in self.conns.items()
                if k.state is ConnState.NEW and now - k.created > (idle_s if k.handshake_sent else deadline_s)
            ]
            gone = [k for cid in late if (k := self._expire_locked(cid)) is not None]
        self._unindex(gone)
        return late

    def _expire_locked(self, conn_id: str) -> Connection | None:
        conn = self.conns.pop(conn_id, None)
        if conn is not None:
            conn.state = ConnState.CLOSED
        self.expired[conn_id] = None
        while len(self.expired) > MAX_EXPIRED:
            self.expired.popitem(last=False)
        self.dropped_unready += 1
        return conn

    def _evict_locked(self, now: float, idle_s: float) -> list[Connection]:
        """Make one slot: the oldest connection that never sent a handshake, else every idle one. Returns
        the connections it took out of the table."""
        silent = sorted(
            (k for k in self.conns.values() if k.state is ConnState.NEW and not k.handshake_sent),
            key=lambda k: k.created,
        )
        if silent:
            conn = self._expire_locked(silent[0].conn_id)
            return [conn] if conn is not None else []
        idle = [cid for cid, k in self.conns.items() if now - k.last_seen > idle_s]
        return [k for cid in idle if (k := self.conns.pop(cid, None)) is not None]
