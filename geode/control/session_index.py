"""Control's connections by attached session: which connections an ``origin.event`` goes to, in O(1).

A stream event from lanes goes to every connection attached to its session. Scanning the whole connection
table for each event cost O(connections) per event (issue 34 session 5); this index is kept by the only
places a connection's set of attached sessions changes (:meth:`Connection.attach` and its eviction of the
oldest, a replay that re-takes a session, and the slot table forgetting a connection), so a lookup is one
dict read. A leaf lock: nothing else is taken while it is held.
"""

from __future__ import annotations

import threading
from typing import Generic, Protocol, TypeVar


class _Conn(Protocol):
    conn_id: str


Connection = TypeVar("Connection", bound=_Conn)  # geode.control.connection.Connection (which imports this)


class SessionIndex(Generic[Connection]):
    """session id → the connections attached to it (in attach order)."""

    def __init__(self) -> None:
        self._by_session: dict[str, dict[str, Connection]] = {}
        self._mu = threading.Lock()

    def add(self, session_id: str, conn: Connection) -> None:
        with self._mu:
            self._by_session.setdefault(session_id, {})[conn.conn_id] = conn

    def discard(self, session_id: str, conn: Connection) -> None:
        with self._mu:
            self._discard_locked(session_id, conn)

    def drop(self, conn: Connection, sessions: list[str]) -> None:
        """``conn`` left the table: it is attached to nothing any more."""
        with self._mu:
            for sid in sessions:
                self._discard_locked(sid, conn)

    def attached_to(self, session_id: str) -> list[Connection]:
        with self._mu:
            conns = self._by_session.get(session_id)
            return list(conns.values()) if conns else []

    def sessions(self) -> int:
        with self._mu:
            return len(self._by_session)

    def _discard_locked(self, session_id: str, conn: Connection) -> None:
        conns = self._by_session.get(session_id)
        if conns is None or conns.get(conn.conn_id) is not conn:
            return
        del conns[conn.conn_id]
        if not conns:
            del self._by_session[session_id]
