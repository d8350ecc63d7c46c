"""``store.search.*`` over any Transport: the executor's ``session_search`` and ``geode search`` use it."""

from __future__ import annotations

from geode.protocol import search as m
from geode.protocol.transport import Transport

STORE = "store"


class SearchClient:
    """Asks the store child; every failure is the store's ``GeodeError`` (no retry: a query is cheap to
    ask again, and a rebuild is one request the caller waits for)."""

    def __init__(self, transport: Transport, target: str = STORE, timeout_s: float = 10.0) -> None:
        self.transport = transport
        self.target = target
        self.timeout_s = timeout_s

    def query(self, query: str, scope: str, limit: int = 10) -> list[m.SearchHit]:
        body = m.SearchQuery(query=query, scope=scope, limit=limit)
        reply = self.transport.call(self.target, m.QUERY, body, timeout_s=self.timeout_s)
        return m.SearchReply.model_validate(reply).hits

    def rebuild(self, timeout_s: float = 600.0) -> m.RebuildReply:
        reply = self.transport.call(self.target, m.REBUILD, m.RebuildSearch(), timeout_s=timeout_s)
        return m.RebuildReply.model_validate(reply)
