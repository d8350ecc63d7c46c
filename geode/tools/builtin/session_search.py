"""session_search: the model finds words in its scope's earlier sessions (the user's messages and the final
answers) and memory files, through the store child's search index (``store.search.query``).

Read-only. The scope asked for is the calling session's own (``ToolContext.scope``, set by the loop from
the session's spec; else the scope its turn record carries), never one from the model's arguments: a chat
sees only that chat's sessions, a job its job's, the operator's CLI sessions everything; a session with no
scope (HEADLESS) has nothing to search."""

from __future__ import annotations

import time
from typing import Any, Protocol

from geode.protocol.errors import BadRequest, GeodeError
from geode.protocol.search import SearchHit
from geode.protocol.transport import Transport
from geode.records.search_client import SearchClient
from geode.records.store_client import StoreClient
from geode.tools.handlers import ToolEnv, ToolFailure

DEFAULT_LIMIT = 5
MAX_LIMIT = 20


class SearchPort(Protocol):
    """The executor's ``search`` service: the index's query and the scope a turn's record carries."""

    def query(self, query: str, scope: str, limit: int = 10) -> list[SearchHit]: ...

    def turn_scope(self, turn_id: str) -> str: ...


class BusSearch:
    """The store child over the executor's bus (``store.search.query``; the turn record for its scope)."""

    def __init__(self, transport: Transport) -> None:
        self.index = SearchClient(transport)
        self.records = StoreClient(transport, attempts=3)

    def query(self, query: str, scope: str, limit: int = 10) -> list[SearchHit]:
        return self.index.query(query, scope, limit)

    def turn_scope(self, turn_id: str) -> str:
        turn = self.records.get_turn(turn_id)
        return str(turn.settings.get("scope") or "") if turn is not None else ""


def calling_scope(env: ToolEnv, port: SearchPort) -> str:
    """The calling session's scope: the context's (set by the loop), else its turn record's settings, set
    by the session's creator ("" when neither says)."""
    scope = str(getattr(env.ctx, "scope", "") or "")
    if scope or not env.ctx.turn_id:
        return scope
    try:
        return port.turn_scope(env.ctx.turn_id)
    except GeodeError:
        return ""


def _result(h: SearchHit) -> dict[str, Any]:
    out: dict[str, Any] = {
        "kind": h.kind,
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(h.at)) if h.at else "",
        "snippet": h.snippet,
    }
    if h.kind == "memory":
        out["memory_file"] = h.path
    else:
        out.update(session_id=h.session_id, turn_id=h.turn_id)
    return out


def session_search(args: dict[str, Any], env: ToolEnv) -> dict[str, Any]:
    query = str(args.get("query") or "").strip()
    limit = max(1, min(int(args.get("limit") or DEFAULT_LIMIT), MAX_LIMIT))
    port: SearchPort | None = env.service("search")
    if port is None:
        raise ToolFailure(
            "session_search is not available here: no search index is reachable.", "tool_unavailable"
        )
    scope = calling_scope(env, port)
    if not scope:
        raise ToolFailure(
            "session_search: this session belongs to no chat, job or operator, so it has no earlier sessions "
            "to search.",
            "tool_policy_denied",
        )
    try:
        hits = port.query(query, scope, limit)
    except BadRequest as exc:
        raise ToolFailure(f"session_search: {exc.message}", "invalid_tool_input") from None
    except GeodeError as exc:
        raise ToolFailure(f"The search index did not answer: {exc.message}", "tool_unavailable") from None
    return {"query": query, "count": len(hits), "results": [_result(h) for h in hits]}
