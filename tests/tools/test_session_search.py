"""session_search through the executor's pipeline with a recording search port: the scope asked for is the
session's own (its context's, else its turn record's), never an argument of the model (the schema refuses
one); a session with no scope is refused before the index is asked; a query the index refuses is one line."""

from __future__ import annotations

from geode.protocol.errors import BadRequest
from geode.protocol.search import SearchHit


class Port:
    def __init__(self, turn_scopes: dict[str, str] | None = None) -> None:
        self.asked: list[tuple[str, str, int]] = []
        self.turn_scopes = turn_scopes or {}

    def query(self, query: str, scope: str, limit: int = 10) -> list[SearchHit]:
        if not query.strip('"'):
            raise BadRequest("empty search query: give at least one word")
        self.asked.append((query, scope, limit))
        return [SearchHit(kind="turn", session_id="s-old", turn_id="t-old", at=1.7e9, snippet="the [zebra]")]

    def turn_scope(self, turn_id: str) -> str:
        return self.turn_scopes.get(turn_id, "")


def test_the_scope_is_the_sessions_own_never_the_models(make_rig) -> None:  # type: ignore[no-untyped-def]
    port = Port({"t-chat": "chat:telegram-5"})
    rig = make_rig(services={"search": port})
    res = rig.call("session_search", {"query": "zebra"}, scope="chat:telegram-9", mode="DAEMON")
    assert not res.is_error, res.content
    assert res.content["results"] == [
        {"kind": "turn", "when": "2023-11-14T22:13:20Z", "snippet": "the [zebra]", "session_id": "s-old",
         "turn_id": "t-old"}
    ]  # fmt: skip
    rig.call("session_search", {"query": "zebra", "limit": 3}, turn_id="t-chat", mode="DAEMON")
    assert port.asked == [("zebra", "chat:telegram-9", 5), ("zebra", "chat:telegram-5", 3)]
    smuggled = rig.call("session_search", {"query": "zebra", "scope": "operator"}, scope="chat:telegram-9")
    assert smuggled.is_error and smuggled.error_type == "invalid_tool_input"
    assert len(port.asked) == 2


def test_no_scope_is_refused_and_a_bad_query_is_one_line(make_rig) -> None:  # type: ignore[no-untyped-def]
    port = Port()
    rig = make_rig(services={"search": port})
    res = rig.call("session_search", {"query": "zebra"}, mode="HEADLESS")
    assert (
        res.is_error and res.error_type == "tool_policy_denied" and "no earlier sessions" in str(res.content)
    )
    assert port.asked == []
    bad = rig.call("session_search", {"query": '""'}, scope="operator")
    assert (
        bad.is_error and bad.error_type == "invalid_tool_input" and "empty search query" in str(bad.content)
    )
    gone = make_rig().call("session_search", {"query": "zebra"}, scope="operator")
    assert gone.is_error and gone.error_type == "tool_unavailable"
