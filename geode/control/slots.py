"""The control socket's connection slots: bounded, and connections that never handshake cannot hold them.

A connection gets ``handshake_deadline_s`` from its first frame (its pings do not extend it); past that it
is dropped and its routing id remembered, so its later frames are refused (a handshake re-admits it). When
the table is full, the oldest connection that never sent a handshake is evicted first, then idle ones.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from geode.control.connection import Connection, ConnState
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

    def get(self, conn_id: str, now: float, *, limit: int, idle_s: float) -> Connection:
        """The connection of ``conn_id``, created if new; ``Overloaded`` when no slot can be freed."""
        with self.mu:
            conn = self.conns.get(conn_id)
            if conn is None or conn.state is ConnState.CLOSED:
                if len(self.conns) >= limit:
                    self._evict_locked(now, idle_s)
                    if len(self.conns) >= limit:
                        raise Overloaded("too many control connections")
                conn = self.conns[conn_id] = Connection(conn_id, last_seen=now, created=now)
            return conn

    def is_expired(self, conn_id: str, *, readmit: bool = False) -> bool:
        """Whether a routing id was dropped for a missed handshake; a handshake (``readmit``) lifts it, so a
        CLI idling across a control restart can still re-attach, while pings alone never earn a slot."""
        with self.mu:
            if readmit:
                self.expired.pop(conn_id, None)
            return conn_id in self.expired

    def pop(self, conn_id: str) -> Connection | None:
        with self.mu:
            return self.conns.pop(conn_id, None)

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
            for cid in late:
                self._expire_locked(cid)
        return late

    def _expire_locked(self, conn_id: str) -> None:
        conn = self.conns.pop(conn_id, None)
        if conn is not None:
            conn.state = ConnState.CLOSED
        self.expired[conn_id] = None
        while len(self.expired) > MAX_EXPIRED:
            self.expired.popitem(last=False)
        self.dropped_unready += 1

    def _evict_locked(self, now: float, idle_s: float) -> None:
        """Make one slot: the oldest connection that never sent a handshake, else every idle one."""
        silent = sorted(
            (k for k in self.conns.values() if k.state is ConnState.NEW and not k.handshake_sent),
            key=lambda k: k.created,
        )
        if silent:
            self._expire_locked(silent[0].conn_id)
            return
        for cid in [cid for cid, k in self.conns.items() if now - k.last_seen > idle_s]:
            self.conns.pop(cid, None)
