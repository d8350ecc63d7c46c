"""The store child's search index (store.search.*, start_store on an inproc bus): finished turns are indexed
as they are stored, redacted; a query sees only its scope's sessions (operator: all; none: nothing); memory
files carry their scope; a damaged or missing index file is rebuilt from the records at start (a log line),
a turn the index missed (stored while it was not running) is caught up, and ``store.search.rebuild`` builds
the same answers from the records."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from actors.bus import Bus
from actors.store import start_store
from geode.home import GeodeHome
from geode.memory.scopes import memory_paths, memory_root
from geode.protocol.errors import BadRequest
from geode.records.engine import RecordEngine
from geode.records.models import CheckpointSave, SessionStatus, TurnRecord, TurnState
from geode.records.search_client import SearchClient
from geode.records.search_feed import memory_scope
from geode.records.settings import StoreConfig
from geode.records.store_client import StoreClient
from tests.actors.tree_kit import geode

SCOPES = {
    "t-a": "chat:telegram-1",
    "t-b": "chat:telegram-2",
    "t-op": "operator",
    "t-none": "",
    "t-job": "job:n",
}


@contextmanager
def served(home: GeodeHome) -> Iterator[tuple[StoreClient, SearchClient]]:
    server = Bus("store", 1, home, single_process=True).start()
    child = start_store(home, bus=server, concurrency=4)
    client = Bus("tester", 1, home, single_process=True).start()
    try:
        yield StoreClient(client.transport, timeout_s=10.0), SearchClient(client.transport)
    finally:
        client.stop()
        server.stop()
        child.stop()


def done_turn(turn_id: str, scope: str, prompt: str, answer: str) -> TurnRecord:
    return TurnRecord(
        turn_id=turn_id,
        session_id=f"s-{turn_id}",
        state=TurnState.DONE,
        input={"text": prompt},
        settings={"scope": scope, "mode": "DAEMON"},
        outcome={"text": answer, "termination_reason": "completed"},
    )


@pytest.fixture
def home(tmp_path: Path) -> GeodeHome:
    return GeodeHome(tmp_path / "h").ensure()


def _seed(store: StoreClient) -> None:
    for tid, scope in SCOPES.items():
        store.put_turn(
            done_turn(tid, scope, f"where is the zebra of {tid}?", f"the zebra sleeps in {tid}'s barn")
        )
    store.put_turn(TurnRecord(turn_id="t-running", session_id="s-r", input={"text": "zebra too early"}))


def test_a_query_sees_only_its_scope_and_the_operator_sees_all(home: GeodeHome) -> None:
    with served(home) as (store, search):
        _seed(store)
        chat_a = search.query("zebra", "chat:telegram-1")
        assert [h.session_id for h in chat_a] == ["s-t-a"]
        assert "[zebra]" in chat_a[0].snippet and chat_a[0].turn_id == "t-a" and chat_a[0].at > 0
        assert [h.session_id for h in search.query("barn", "chat:telegram-2")] == ["s-t-b"]
        assert {h.turn_id for h in search.query("zebra", "operator", limit=50)} == set(SCOPES)
        assert search.query("zebra", "") == []  # a session with no scope sees nothing
        assert [h.turn_id for h in search.query("zebra", "job:n")] == ["t-job"]
        assert search.query("zebr*", "chat:telegram-1")[0].turn_id == "t-a"  # a prefix
        assert search.query('zebra" OR NEAR(', "operator") == []  # the user's words, never FTS5 syntax
        assert len(search.query('"zebra" barn', "operator", limit=50)) == len(SCOPES)
        with pytest.raises(BadRequest, match="empty search query"):
            search.query('" "', "operator")


def test_secrets_are_redacted_before_they_reach_the_index(home: GeodeHome) -> None:
    key = "sk-ant-api03-Zq7xY9w2Kd8LmN4p"
    with served(home) as (store, search):
        store.put_turn(done_turn("t-k", "operator", f"my key is {key} keep it", "noted the okapi"))
        (hit,) = search.query("okapi", "operator")
        assert search.query("keep", "operator")[0].snippet.count(key) == 0
        assert search.query("Zq7xY9w2Kd8LmN4p", "operator") == [] and hit.turn_id == "t-k"
    assert key.encode() not in b"".join(p.read_bytes() for p in home.records_dir.glob("search.sqlite*"))


def test_memory_files_are_found_by_their_own_scope_only(home: GeodeHome) -> None:
    chat = home.root / "memory" / "chats" / "telegram-1" / "MEMORY.md"
    chat.parent.mkdir(parents=True)
    chat.write_text("- the user's cat is called Quasimodo\n")
    (home.root / "memory" / "MEMORY.md").write_text("- the operator prefers tabs over Quasimodo\n")
    with served(home) as (_store, search):
        (hit,) = search.query("quasimodo", "chat:telegram-1")
        assert hit.kind == "memory" and hit.path == "memory/chats/telegram-1/MEMORY.md"
        assert search.query("quasimodo", "chat:telegram-2") == []
        assert {h.path for h in search.query("quasimodo", "operator")} == {
            "memory/chats/telegram-1/MEMORY.md",
            "memory/MEMORY.md",
        }


def test_a_damaged_index_or_a_missed_turn_is_rebuilt_from_the_records(
    home: GeodeHome, caplog: pytest.LogCaptureFixture
) -> None:
    with served(home) as (store, search):
        _seed(store)
    index = home.records_dir / "search.sqlite"
    assert index.exists()
    with RecordEngine.for_home(home) as engine:  # stored while no index ran: the next start catches up
        engine.turns.put(done_turn("t-late", "chat:telegram-1", "the late zebra", "arrived"))
    index.write_bytes(b"this is not an sqlite file at all" * 100)
    with caplog.at_level(logging.INFO, logger="geode.records.search_feed"), served(home) as (_store, search):
        assert {h.turn_id for h in search.query("zebra", "chat:telegram-1")} == {"t-a", "t-late"}
        assert "unreadable" in caplog.text and "rebuilding it from the records" in caplog.text
        before = [(h.turn_id, h.snippet) for h in search.query("zebra", "operator", limit=50)]
        reply = search.rebuild()
        assert reply.turns == len(SCOPES) + 1 and reply.memory_files == 0
        assert [(h.turn_id, h.snippet) for h in search.query("zebra", "operator", limit=50)] == before
    index.unlink()
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="geode.records.search_feed"), served(home) as (_store, search):
        assert len(search.query("zebra", "operator", limit=50)) == len(SCOPES) + 1
        assert "is missing: building it from the records" in caplog.text


def test_geode_search_with_no_daemon_reads_the_index_file_as_the_store_left_it(home: GeodeHome) -> None:
    with served(home) as (store, _search):
        _seed(store)
    r = geode(home, "search", "zebra", "--json", "--limit", "50")
    assert r.returncode == 0, r.stderr
    assert {h["turn_id"] for h in json.loads(r.stdout)["hits"]} == set(SCOPES)
    assert "no daemon runs" in r.stderr
    r = geode(home, "search", "--rebuild")
    assert r.returncode == 1 and "start `geode serve` first" in r.stderr


def test_a_memory_files_scope_is_the_one_whose_file_it_is(home: GeodeHome) -> None:
    """The index reads a scope back from a memory file's path: the inverse of memory_paths."""
    root = memory_root(home.root)
    for scope in ("operator", "chat:telegram-1", "job:nightly.digest", "hook:github"):
        assert memory_scope(memory_paths(scope, home.root)[0].relative_to(root)) == scope
    assert memory_scope(Path("chats") / "a b" / "MEMORY.md") is None  # not a key a scope can hold
    assert memory_scope(Path("chats") / "x" / "notes.md") is None


def test_a_pruned_session_leaves_the_index_too(home: GeodeHome) -> None:
    server = Bus("store", 1, home, single_process=True).start()
    child = start_store(home, bus=server, concurrency=4, config=StoreConfig(session_retention_days=0))
    client = Bus("tester", 1, home, single_process=True).start()
    try:
        store, search = StoreClient(client.transport, timeout_s=10.0), SearchClient(client.transport)
        for tid in ("t-a", "t-op"):
            store.put_turn(done_turn(tid, "operator", f"the okapi of {tid}", "noted"))
        done = CheckpointSave(session_id="s-t-a", seq=1, base_count=0, status=SessionStatus.COMPLETED)
        store.save_checkpoint(done)
        assert {h.turn_id for h in search.query("okapi", "operator")} == {"t-a", "t-op"}
        assert store.prune()["sessions"] == 1  # completed and past a retention of 0 days
        assert [h.turn_id for h in search.query("okapi", "operator")] == ["t-op"]
    finally:
        client.stop()
        server.stop()
        child.stop()
