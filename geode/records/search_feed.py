"""Keeps the search index (:mod:`geode.records.search_index`) current inside the store child.

A turn record stored ``done`` is queued here (:meth:`SearchFeed.turn_stored`, after its group commit) and
indexed by one feed thread in batches, so a slow index never delays a store reply. At start, and after a
prune, the feed syncs the index with the records: a done turn not indexed yet (the store died between its
commit and its indexing) is added, an indexed turn the records no longer hold (pruned) is dropped. Memory
files under ``$GEODE_HOME/memory`` are re-read when their mtime or size changed (at most every few seconds,
on a query). A missing, damaged or foreign index file is rebuilt from the records with a log line;
:meth:`SearchFeed.rebuild` (``store.search.rebuild``) rebuilds it on request. Never the other way round: the
index never feeds the records.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from geode.memory.scopes import MEMORY_FILE, OPERATOR, ScopeError, memory_root, parse_scope
from geode.protocol.errors import BadRequest, Unavailable
from geode.records.lmdb_env import prefix, scan_prefix
from geode.records.models import TurnRecord, TurnState
from geode.records.search_index import MAX_FIELD, Entry, Hit, SearchIndex
from geode.redaction import redact_text

if TYPE_CHECKING:
    from geode.records.engine import RecordEngine

log = logging.getLogger(__name__)
FILE_NAME = "search.sqlite"
BATCH = 500
FLUSH_S = 2.0  # a query first waits this long at most for turns stored before it to be indexed
MEMORY_EVERY_S = 2.0
MEMORY_MAX_BYTES = 256 * 1024  # of one memory file read for the index
T = TypeVar("T")
_SYNC = object()  # a queued sync request
# memory/<dir>/<name>/MEMORY.md → "<kind>:<name>"; memory/MEMORY.md → operator (geode/memory/scopes.py)
_MEMORY_DIRS = {"chats": "chat", "jobs": "job", "hooks": "hook"}


def turn_entry(turn: TurnRecord) -> Entry:
    """A done turn's index entry: its user message and final answer, redacted like the timeline, with its
    session's scope (set by the session's creator in the turn's settings, never by the model)."""
    outcome = turn.outcome or {}
    return Entry(
        key=f"turn:{turn.turn_id}",
        kind="turn",
        session_id=turn.session_id,
        turn_id=turn.turn_id,
        scope=str(turn.settings.get("scope") or ""),
        at=turn.updated_at or turn.created_at,
        prompt=redact_text(str(turn.input.get("text") or ""), MAX_FIELD),
        text=redact_text(str(outcome.get("text") or ""), MAX_FIELD),
    )


def memory_scope(rel: Path) -> str | None:
    """The scope of a memory file from its path under ``$GEODE_HOME/memory`` (None: not a memory file), the
    inverse of :func:`geode.memory.scopes.memory_paths`."""
    parts = rel.parts
    if parts == (MEMORY_FILE,):
        return OPERATOR
    if len(parts) == 3 and parts[2] == MEMORY_FILE and parts[0] in _MEMORY_DIRS:
        scope = f"{_MEMORY_DIRS[parts[0]]}:{parts[1]}"
        try:
            parse_scope(scope)
        except ScopeError:
            return None
        return scope
    return None


def memory_files(memory_dir: Path) -> Iterator[tuple[Path, str]]:
    """(path, scope) of every memory file of the home (regular files only, never through a symlink)."""
    candidates = [
        memory_dir / MEMORY_FILE,
        *(memory_dir / d / n / MEMORY_FILE for d in _MEMORY_DIRS for n in _names(memory_dir / d)),
    ]
    for path in candidates:
        if path.is_file() and not path.is_symlink():
            scope = memory_scope(path.relative_to(memory_dir))
            if scope is not None:
                yield path, scope


def _names(d: Path) -> list[str]:
    try:
        return sorted(p.name for p in d.iterdir() if p.is_dir() and not p.is_symlink())
    except OSError:
        return []


@dataclass
class FeedStats:
    indexed: int = 0
    rebuilds: int = 0
    failures: int = 0
    last_error: str = ""


class SearchFeed:
    """The store child's index writer: one thread applies queued turns; queries and rebuilds share its
    lock."""

    def __init__(self, engine: RecordEngine, path: Path, memory_dir: Path) -> None:
        self.engine = engine
        self.path = path
        self.memory_dir = memory_dir
        self.index = SearchIndex(path)
        self.stats = FeedStats()
        self._lock = threading.RLock()  # the index: one user at a time
        self._cv = threading.Condition()
        self._queue: deque[object] = deque()
        self._pending = 0
        self._stopping = False
        self._memory_checked = 0.0
        self._thread: threading.Thread | None = None

    @classmethod
    def for_engine(cls, engine: RecordEngine, home_root: Path) -> SearchFeed:
        return cls(engine, engine.renv.path / FILE_NAME, memory_root(home_root))

    # lifecycle --------------------------------------------------------------------------------------
    def start(self) -> SearchFeed:
        with self._lock:
            self._open()
        self._thread = threading.Thread(target=self._run, name="search-feed", daemon=True)
        self._thread.start()
        self.request_sync()
        return self

    def stop(self) -> None:
        with self._cv:
            self._stopping = True
            self._cv.notify_all()
        if self._thread is not None:
            self._thread.join(5)
        with self._lock:
            self.index.close()

    def _open(self) -> None:
        """Open the file; a damaged or foreign one is removed and built again from the records."""
        existed = self.path.exists()
        try:
            self.index.open()
        except sqlite3.DatabaseError as exc:
            log.warning("search index %s is unreadable (%s): rebuilding it from the records", self.path, exc)
            self.stats.rebuilds += 1
            self.index.close()
            _remove(self.path)
            self.index.open()
            return
        if not existed:
            log.info("search index %s is missing: building it from the records", self.path)

    # the feed ---------------------------------------------------------------------------------------
    def turn_stored(self, turn: TurnRecord) -> None:
        """A turn record was committed: index it once it is done."""
        if turn.state == TurnState.DONE:
            self._enqueue(turn)

    def request_sync(self) -> None:
        self._enqueue(_SYNC)

    def _enqueue(self, item: object) -> None:
        with self._cv:
            self._queue.append(item)
            self._pending += 1
            self._cv.notify_all()

    def flush(self, timeout_s: float = FLUSH_S) -> bool:
        """Wait until everything queued before now is indexed (False: not within ``timeout_s``)."""
        with self._cv:
            return self._cv.wait_for(lambda: self._pending == 0 or self._stopping, timeout_s)

    def _run(self) -> None:
        while True:
            with self._cv:
                self._cv.wait_for(lambda: self._queue or self._stopping)
                if self._stopping:
                    return
                batch = [self._queue.popleft() for _ in range(min(BATCH, len(self._queue)))]
            try:
                turns = [turn_entry(t) for t in batch if isinstance(t, TurnRecord)]  # redacted: no lock held
                with self._lock:
                    self._guarded(lambda: self.index.put(turns))  # noqa: B023 (called at once)
                    self.stats.indexed += len(turns)
                if any(item is _SYNC for item in batch):
                    self._sync()
            except Exception as exc:  # the feed thread never dies: the next sync catches up
                self.stats.failures += 1
                self.stats.last_error = f"{type(exc).__name__}: {exc}"[:300]
                log.warning("search index update failed: %s", self.stats.last_error)
            finally:
                with self._cv:
                    self._pending -= len(batch)
                    self._cv.notify_all()

    def _guarded(self, fn: Callable[[], T]) -> T:
        """``fn()``; the file damaged meanwhile → rebuilt from the records, then ``fn()`` once more."""
        try:
            return fn()
        except sqlite3.OperationalError as exc:
            if "fts5" in str(exc):
                raise BadRequest(f"search query not understood: {exc}") from None
            raise
        except sqlite3.DatabaseError as exc:
            log.warning("search index %s failed (%s): rebuilding it from the records", self.path, exc)
            self._rebuild_locked()
            return fn()

    def _done_ids(self) -> set[str]:
        renv = self.engine.renv
        with renv.read() as txn:
            pairs = scan_prefix(txn, renv.db("turn_state"), prefix(TurnState.DONE.value))
            return {k.split(b"\x00", 1)[1].decode() for k, _ in pairs}

    def _sync(self) -> None:
        """Index the done turns the index lacks, drop the ones the records no longer hold, re-read memory.
        The lock is taken per batch, so queries answer meanwhile (from what is indexed so far)."""
        done = self._done_ids()
        with self._lock:
            indexed = {k.split(":", 1)[1] for k in self._guarded(lambda: self.index.keys("turn"))}
        missing = sorted(done - indexed)
        for i in range(0, len(missing), BATCH):
            recs = (self.engine.turns.get(t) for t in missing[i : i + BATCH])
            entries = [turn_entry(r) for r in recs if r is not None and r.state == TurnState.DONE]
            with self._lock:
                self._guarded(lambda: self.index.put(entries))  # noqa: B023 (called at once)
        gone = indexed - done
        with self._lock:
            if gone:
                self._guarded(lambda: self.index.delete(f"turn:{t}" for t in gone))
            self._guarded(self._refresh_memory)
        if missing or gone:
            log.info(
                "search index synced with the records: %d turns added, %d dropped", len(missing), len(gone)
            )

    def _refresh_memory(self) -> None:
        self._memory_checked = time.monotonic()
        known = self.index.keys("memory")
        seen: set[str] = set()
        changed: list[Entry] = []
        for path, scope in memory_files(self.memory_dir):
            try:
                st = path.stat()
                rel = str(path.relative_to(self.memory_dir.parent))
                key, stamp = f"memory:{rel}", f"{st.st_mtime_ns}:{st.st_size}"
                seen.add(key)
                if known.get(key) == stamp:
                    continue
                with path.open("rb") as f:
                    text = f.read(MEMORY_MAX_BYTES).decode("utf-8", "replace")
            except OSError:
                continue
            text = redact_text(text, MAX_FIELD)
            changed.append(Entry(key, "memory", "", "", scope, st.st_mtime, MEMORY_FILE, text, stamp))
        if changed:
            self.index.put(changed)
        gone = set(known) - seen
        if gone:
            self.index.delete(gone)

    # requests ---------------------------------------------------------------------------------------
    def query(self, text: str, scope: str, limit: int) -> list[Hit]:
        """Matches ``scope`` may see, after the turns stored before the query are indexed."""
        self.flush()
        with self._lock:
            if time.monotonic() - self._memory_checked >= MEMORY_EVERY_S:
                self._guarded(self._refresh_memory)
            hits: list[Hit] = self._guarded(lambda: self.index.query(text, scope, limit))
            return hits

    def rebuild(self) -> dict[str, float]:
        """Build a new index from the records (every done turn, every memory file) and swap it in."""
        t0 = time.monotonic()
        with self._lock:
            counts = self._rebuild_locked()
        return {**counts, "seconds": round(time.monotonic() - t0, 3)}

    def _rebuild_locked(self) -> dict[str, float]:
        fresh = self.path.with_name(self.path.name + ".new")
        _remove(fresh)
        new = SearchIndex(fresh).open()
        try:
            done = self.engine.turns.list(state=TurnState.DONE.value)
            for i in range(0, len(done), BATCH):
                new.put(turn_entry(t) for t in done[i : i + BATCH])
        except BaseException:
            new.close()
            _remove(fresh)
            raise
        new.close()
        self.index.close()
        _remove(self.path)
        os.replace(fresh, self.path)
        try:
            self.index.open()
            self._refresh_memory()
        except sqlite3.DatabaseError as exc:
            raise Unavailable(f"search index rebuilt but unreadable: {exc}") from None
        self.stats.rebuilds += 1
        counts = self.index.count()
        log.info("search index rebuilt from the records: %s", counts)
        return {"turns": counts.get("turn", 0), "memory_files": counts.get("memory", 0)}


def _remove(path: Path) -> None:
    for p in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        try:
            p.unlink()
        except FileNotFoundError:
            pass
