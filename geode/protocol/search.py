"""Messages of the search protocol area: queries over the store's index of past sessions and its rebuild.

Served by the store child (the index's only writer; docs/records.md "Search index"). The caller names the
scope it asks for: the executor passes the calling session's own scope (never one the model gave), the CLI
``operator``. A query from scope S sees only S's sessions; ``operator`` sees all; no scope sees nothing.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from geode.protocol.catalog import message

MAX_LIMIT = 100


class SearchQuery(BaseModel):
    """Words to find (all must match; ``word*`` is a prefix), in what ``scope`` may see, best first."""

    query: str = Field(min_length=1, max_length=1000)
    scope: str = Field(default="", max_length=300)
    limit: int = Field(default=10, ge=1, le=MAX_LIMIT)


class SearchHit(BaseModel):
    kind: Literal["turn", "memory"]
    session_id: str = ""
    turn_id: str = ""
    scope: str = ""
    at: float = 0.0  # when the turn finished (a memory file: its modification time)
    snippet: str = ""  # the match in [brackets], redacted like the timeline
    path: str = ""  # a memory file's path under GEODE_HOME


class SearchReply(BaseModel):
    hits: list[SearchHit] = Field(default_factory=list)


class RebuildSearch(BaseModel):
    """Build the index again from the records (every finished turn, every memory file) and swap it in."""


class RebuildReply(BaseModel):
    turns: int = 0
    memory_files: int = 0
    seconds: float = 0.0


QUERY = message("store.search.query", SearchQuery, SearchReply)
REBUILD = message("store.search.rebuild", RebuildSearch, RebuildReply)
