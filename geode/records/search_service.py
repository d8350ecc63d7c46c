"""The store's routes for the search index (``store.search.*``): a query answers from the index after the
turns stored before it are indexed; a rebuild builds the index again from the records. A store without an
index (an engine served in tests) answers ``unavailable``."""

from __future__ import annotations

from pydantic import BaseModel

from geode.protocol import search as m
from geode.protocol.dispatch import Handler
from geode.protocol.errors import Unavailable
from geode.protocol.transport import Request
from geode.records.search_feed import SearchFeed
from geode.records.search_index import Hit


def hit_message(h: Hit) -> m.SearchHit:
    """One index hit as the protocol's ``SearchHit``."""
    return m.SearchHit(
        kind="memory" if h.kind == "memory" else "turn",
        session_id=h.session_id,
        turn_id=h.turn_id,
        scope=h.scope,
        at=h.at,
        snippet=h.snippet,
        path=h.path,
    )


class SearchRoutes:
    """``plain`` handlers for :class:`geode.protocol.dispatch.Dispatch` (they run on handler threads)."""

    def __init__(self, feed: SearchFeed | None) -> None:
        self.feed = feed
        self.plain: dict[str, Handler] = {m.QUERY: self._query, m.REBUILD: self._rebuild}

    def _feed(self) -> SearchFeed:
        if self.feed is None:
            raise Unavailable("this store keeps no search index")
        return self.feed

    def _query(self, b: m.SearchQuery, r: Request) -> BaseModel:
        return m.SearchReply(hits=[hit_message(h) for h in self._feed().query(b.query, b.scope, b.limit)])

    def _rebuild(self, b: m.RebuildSearch, r: Request) -> BaseModel:
        counts = self._feed().rebuild()
        return m.RebuildReply(
            turns=int(counts["turns"]), memory_files=int(counts["memory_files"]), seconds=counts["seconds"]
        )
