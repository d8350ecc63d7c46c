"""The search index over past sessions: one SQLite FTS5 file beside the records (``records/search.sqlite``).

Derived data, written only by the store child (:mod:`geode.records.search_feed`): one entry per finished turn
(the user's message and the final answer) and one per memory file, each with the scope of its session
(``operator``, ``chat:<platform>-<chat>``, ``job:<id>``, ``hook:<route>``, ``""`` for none). Text is redacted
like the timeline before it is stored. A query from scope S sees only S's entries; ``operator`` sees all; an
entry with no scope is seen only by the operator. The records are the truth: the file can be deleted and
rebuilt from them at any time (``geode search --rebuild``).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from geode.protocol.errors import BadRequest

SCHEMA_VERSION = "1"
OPERATOR = "operator"
MAX_FIELD = 16 * 1024  # characters of one indexed text (the timeline's string bound)
SNIPPET_TOKENS = 16
CANDIDATES = 1000  # a query ranks the newest this many matches it may see
# SQLite's page cache of one connection, in KiB (``PRAGMA cache_size`` negative = KiB). SQLite's default,
# 2,000 KiB, fills as the file grows: the store's native memory grew ~0.22 MiB a 1,000 turns for ~10,000 turns
# (a heaptrack of the store child in a soak: all its malloc growth under sqlite3BtreeInsert). The file sits in
# the OS page cache anyway; an insert costs the same, a query ~10 % more.
CACHE_KIB = 512
_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS meta(k TEXT PRIMARY KEY, v TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS entries(id INTEGER PRIMARY KEY, key TEXT UNIQUE NOT NULL, kind TEXT NOT NULL,"
    " session_id TEXT NOT NULL, turn_id TEXT NOT NULL, scope TEXT NOT NULL, at REAL NOT NULL,"
    " stamp TEXT NOT NULL DEFAULT '')",
    "CREATE INDEX IF NOT EXISTS entries_scope ON entries(scope)",
    "CREATE INDEX IF NOT EXISTS entries_kind ON entries(kind)",
    "CREATE VIRTUAL TABLE IF NOT EXISTS fts USING fts5(prompt, text,"
    " tokenize='unicode61 remove_diacritics 2')",
)


@dataclass(frozen=True)
class Entry:
    """One indexed document: a turn (``turn:<turn id>``) or a memory file (``memory:<path>``)."""

    key: str  # texts below are redacted by whoever builds the entry (geode.records.search_feed)
    kind: str  # turn | memory
    session_id: str
    turn_id: str
    scope: str
    at: float
    prompt: str
    text: str
    stamp: str = ""  # a memory file's mtime and size: re-indexed only when it changed


@dataclass(frozen=True)
class Hit:
    kind: str
    session_id: str
    turn_id: str
    scope: str
    at: float
    snippet: str
    path: str = ""  # a memory file's path relative to the home


def match_expression(query: str) -> str:
    """The user's words as an FTS5 expression that cannot be a syntax error: every word a quoted phrase
    (all must match), a trailing ``*`` kept as a prefix search. Empty → :class:`BadRequest`."""
    terms = []
    for word in query.split():
        prefix = word.endswith("*") and len(word.rstrip("*")) > 0
        word = word.rstrip("*") if prefix else word
        if not word.strip('"'):
            continue
        terms.append('"' + word.replace('"', '""') + '"' + ("*" if prefix else ""))
    if not terms:
        raise BadRequest("empty search query: give at least one word")
    return " ".join(terms)


def visible_to(scope: str) -> tuple[str, tuple[str, ...]]:
    """The SQL condition (and its parameters) on ``entries`` of what a caller of ``scope`` may see."""
    if scope == OPERATOR:
        return "1", ()
    if not scope:
        return "0", ()  # a session with no scope sees nothing (and is seen only by the operator)
    return "e.scope = ?", (scope,)


class SearchIndex:
    """The FTS5 file. Not thread-safe: its owner (the feed) serialises every call."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.conn: sqlite3.Connection | None = None

    def open(self) -> SearchIndex:
        """Open (creating) and check the file; a damaged or foreign one raises ``sqlite3.DatabaseError``."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute(f"PRAGMA cache_size=-{CACHE_KIB}")
            for stmt in _SCHEMA:
                conn.execute(stmt)
            version = conn.execute("SELECT v FROM meta WHERE k='schema'").fetchone()
            if version is None:
                conn.execute("INSERT INTO meta(k, v) VALUES('schema', ?)", (SCHEMA_VERSION,))
            elif version[0] != SCHEMA_VERSION:
                raise sqlite3.DatabaseError(f"schema version {version[0]}, not {SCHEMA_VERSION}")
            check = conn.execute("PRAGMA quick_check").fetchone()
            if check is None or check[0] != "ok":
                raise sqlite3.DatabaseError(f"quick_check: {check[0] if check else 'no answer'}")
            conn.execute("SELECT count(*) FROM fts WHERE fts MATCH 'geode'").fetchone()
        except BaseException:
            conn.close()
            raise
        self.conn = conn
        return self

    def open_readonly(self) -> SearchIndex:
        """Open the file for reading only (``geode search`` with no daemon: nobody writes it); a missing or
        unreadable file raises ``sqlite3.DatabaseError``."""
        if not self.path.is_file():
            raise sqlite3.OperationalError(f"no search index at {self.path}")
        uri = self.path.resolve().as_uri()
        try:
            conn = sqlite3.connect(f"{uri}?mode=ro", uri=True, check_same_thread=False)
            conn.execute("SELECT count(*) FROM entries").fetchone()
        except sqlite3.OperationalError:  # WAL without its -shm, which a reader may not create
            conn = sqlite3.connect(f"{uri}?immutable=1", uri=True, check_same_thread=False)
            conn.execute("SELECT count(*) FROM entries").fetchone()
        conn.execute(f"PRAGMA cache_size=-{CACHE_KIB}")
        self.conn = conn
        return self

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None

    def _c(self) -> sqlite3.Connection:
        if self.conn is None:
            raise sqlite3.ProgrammingError("search index is not open")
        return self.conn

    def put(self, entries: Iterable[Entry]) -> int:
        """Insert or replace entries (by key) in one transaction (texts already redacted: :func:`redact_text`
        by the feed, outside the index's lock). Returns the count."""
        c = self._c()
        n = 0
        c.execute("BEGIN")
        try:
            for e in entries:
                self._delete_key(c, e.key)
                cur = c.execute(
                    "INSERT INTO entries(key, kind, session_id, turn_id, scope, at, stamp)"
                    " VALUES(?,?,?,?,?,?,?)",
                    (e.key, e.kind, e.session_id, e.turn_id, e.scope, e.at, e.stamp),
                )
                c.execute(
                    "INSERT INTO fts(rowid, prompt, text) VALUES(?,?,?)",
                    (cur.lastrowid, e.prompt[:MAX_FIELD], e.text[:MAX_FIELD]),
                )
                n += 1
            c.execute("COMMIT")
        except BaseException:
            c.execute("ROLLBACK")
            raise
        return n

    def delete(self, keys: Iterable[str]) -> int:
        c = self._c()
        n = 0
        c.execute("BEGIN")
        try:
            for k in keys:
                n += self._delete_key(c, k)
            c.execute("COMMIT")
        except BaseException:
            c.execute("ROLLBACK")
            raise
        return n

    @staticmethod
    def _delete_key(c: sqlite3.Connection, key: str) -> int:
        row = c.execute("SELECT id FROM entries WHERE key = ?", (key,)).fetchone()
        if row is None:
            return 0
        c.execute("DELETE FROM fts WHERE rowid = ?", (row[0],))
        c.execute("DELETE FROM entries WHERE id = ?", (row[0],))
        return 1

    def keys(self, kind: str) -> dict[str, str]:
        """Every key of ``kind`` with its stamp."""
        rows = self._c().execute("SELECT key, stamp FROM entries WHERE kind = ?", (kind,)).fetchall()
        return {k: s for k, s in rows}

    def query(self, query: str, scope: str, limit: int) -> list[Hit]:
        """The best ``limit`` matches ``scope`` may see: ranked (FTS5 bm25, then newest first) among the
        newest :data:`CANDIDATES` matching entries, so a word in nearly every session costs a bounded scan;
        snippets are made for the winners only."""
        where, params = visible_to(scope)
        if where == "0":
            return []
        c, expr = self._c(), match_expression(query)
        ids = [
            row[0]
            for row in c.execute(
                "SELECT id FROM (SELECT fts.rowid AS id, bm25(fts) AS score, e.at AS at, e.key AS key"
                f" FROM fts JOIN entries e ON e.id = fts.rowid WHERE fts MATCH ? AND {where}"
                " ORDER BY fts.rowid DESC LIMIT ?) ORDER BY score, at DESC, key LIMIT ?",
                (expr, *params, CANDIDATES, limit),
            )
        ]
        if not ids:
            return []
        rows = c.execute(
            "SELECT e.id, e.kind, e.session_id, e.turn_id, e.scope, e.at, e.key,"
            f" snippet(fts, -1, '[', ']', '…', {SNIPPET_TOKENS})"
            " FROM fts JOIN entries e ON e.id = fts.rowid"
            f" WHERE fts MATCH ? AND fts.rowid IN ({','.join('?' * len(ids))})",
            (expr, *ids),
        ).fetchall()
        by_id = {
            row[0]: Hit(
                row[1],
                row[2],
                row[3],
                row[4],
                row[5],
                row[7],
                row[6].split(":", 1)[1] if row[1] == "memory" else "",
            )
            for row in rows
        }
        return [by_id[i] for i in ids if i in by_id]

    def count(self) -> dict[str, int]:
        rows = self._c().execute("SELECT kind, count(*) FROM entries GROUP BY kind").fetchall()
        return {k: n for k, n in rows}
