"""Search over past sessions: query time in the store's index (issue 32 item 2), with a raw FTS5 baseline.

Run: .venv/bin/python scripts/bench/search.py [--sessions 1000] [--turns 20] [--queries 300]
Builds a store in a temporary home with ``sessions x turns`` finished turns (a user message of ~25 words and
an answer of ~90, from a 6,000-word vocabulary with a Zipf-like skew; sessions spread over 50 chat scopes,
the operator's and no scope), starts the store child's builder (``start_store`` on an in-process bus) whose
search feed catches the index up from the records (timed), then times the same queries (one or two words;
a quarter of them a frequent word) three ways in one run:

* ``store (operator)`` / ``store (chat scope)``: ``store.search.query`` through the bus to the store child's
  handler (flush, memory check, scope filter, rank, snippet) and back;
* ``feed`` : :meth:`SearchFeed.query` in the store's process (no bus);
* ``raw fts5``: a bare ``SELECT rowid, snippet(...) ... MATCH ? ORDER BY rank LIMIT 10`` on an FTS5 table
  holding the same texts (no scope, no join, no redaction) — the baseline.
"""

from __future__ import annotations

import argparse
import random
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from actors.bus import Bus
from actors.store import start_store
from geode.home import GeodeHome
from geode.records.engine import RecordEngine
from geode.records.lmdb_env import Txn
from geode.records.models import TurnRecord, TurnState
from geode.records.search_client import SearchClient
from geode.records.search_index import match_expression


def _vocab(rng: random.Random, n: int = 6000) -> list[str]:
    letters = "abcdefghijklmnopqrstuvwxyz"
    return ["".join(rng.choice(letters) for _ in range(rng.randint(3, 9))) for _ in range(n)]


def _text(rng: random.Random, vocab: list[str], words: int) -> str:
    # a Zipf-like skew: low indexes are frequent
    return " ".join(vocab[min(int(rng.paretovariate(1.1)) - 1, len(vocab) - 1)] for _ in range(words))


def _scope(i: int) -> str:
    return "operator" if i % 10 == 0 else "" if i % 10 == 1 else f"chat:telegram-{i % 50}"


def _put_all(engine: RecordEngine, batch: list[TurnRecord]) -> None:
    """One write transaction for the whole batch (the store's own put, without a commit per turn)."""

    def put(txn: Txn) -> None:
        for turn in batch:
            engine.turns._put(txn, turn)

    engine.writer.run(put)


def _seed(
    home: GeodeHome, sessions: int, turns: int, rng: random.Random, vocab: list[str]
) -> list[tuple[str, str]]:
    texts = []
    with RecordEngine.for_home(home) as engine:
        batch: list[TurnRecord] = []
        for s in range(sessions):
            for t in range(turns):
                prompt, answer = _text(rng, vocab, 25), _text(rng, vocab, 90)
                texts.append((prompt, answer))
                batch.append(
                    TurnRecord(
                        turn_id=f"t{s}-{t}",
                        session_id=f"s{s}",
                        state=TurnState.DONE,
                        input={"text": prompt},
                        settings={"scope": _scope(s)},
                        outcome={"text": answer},
                    )
                )
                if len(batch) == 500:
                    _put_all(engine, batch)
                    batch = []
        if batch:
            _put_all(engine, batch)
    return texts


def _raw(path: Path, texts: list[tuple[str, str]]) -> sqlite3.Connection:
    conn = sqlite3.connect(path)
    conn.execute("CREATE VIRTUAL TABLE t USING fts5(prompt, text)")
    conn.executemany("INSERT INTO t(prompt, text) VALUES(?, ?)", texts)
    conn.commit()
    return conn


def _time(fn: Callable[[str], object], queries: list[str]) -> list[float]:
    out = []
    for q in queries:
        t0 = time.perf_counter()
        fn(q)
        out.append((time.perf_counter() - t0) * 1000)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sessions", type=int, default=1000)
    ap.add_argument("--turns", type=int, default=20)
    ap.add_argument("--queries", type=int, default=300)
    a = ap.parse_args()
    rng = random.Random(32)
    vocab = _vocab(rng)
    with tempfile.TemporaryDirectory() as d:
        home = GeodeHome(Path(d) / "h").ensure()
        t0 = time.perf_counter()
        texts = _seed(home, a.sessions, a.turns, rng, vocab)
        print(f"seeded {len(texts)} finished turns in {time.perf_counter() - t0:.1f}s")
        server = Bus("store", 1, home, single_process=True).start()
        t0 = time.perf_counter()
        child = start_store(home, bus=server, concurrency=8)
        assert child.search is not None
        child.search.flush(600)
        print(f"store start + index catch-up from the records: {time.perf_counter() - t0:.1f}s")
        size = sum(p.stat().st_size for p in home.records_dir.glob("search.sqlite*"))
        print(f"index file: {size / 1e6:.1f} MB")
        client = Bus("bench", 1, home, single_process=True).start()
        search = SearchClient(client.transport)
        raw = _raw(Path(d) / "raw.sqlite", texts)
        frequent = vocab[:20]
        queries = [
            rng.choice(frequent) if i % 4 == 0 else " ".join(rng.sample(vocab[20:600], rng.randint(1, 2)))
            for i in range(a.queries)
        ]
        sql = "SELECT rowid, snippet(t, -1, '[', ']', '…', 16) FROM t WHERE t MATCH ? ORDER BY rank LIMIT 10"
        runs: dict[str, Callable[[str], object]] = {
            "store (operator)": lambda q: search.query(q, "operator", 10),
            "store (chat scope)": lambda q: search.query(q, "chat:telegram-7", 10),
            "feed": lambda q: child.search.query(q, "operator", 10),  # type: ignore[union-attr]
            "raw fts5": lambda q: raw.execute(sql, (match_expression(q),)).fetchall(),
        }
        for fn in runs.values():  # warm the page cache alike
            _time(fn, queries[:20])
        results: dict[str, list[float]] = {k: [] for k in runs}
        for _ in range(3):  # interleaved rounds: machine load hits each alike
            for name, fn in runs.items():
                results[name] += _time(fn, queries)
        base = statistics.median(results["raw fts5"])
        print(f"{'path':<20}{'p50 ms':>9}{'p99 ms':>9}{'max ms':>9}{'p50 / raw':>11}")
        for name, xs in results.items():
            p50, p99 = statistics.median(xs), statistics.quantiles(xs, n=100)[98]
            print(f"{name:<20}{p50:>9.2f}{p99:>9.2f}{max(xs):>9.2f}{p50 / base:>10.1f}x")
        t0 = time.perf_counter()
        rebuilt = search.rebuild()
        print(f"rebuild from the records: {rebuilt.turns} turns in {time.perf_counter() - t0:.1f}s")
        raw.close()
        client.stop()
        server.stop()
        child.stop()


if __name__ == "__main__":
    main()
