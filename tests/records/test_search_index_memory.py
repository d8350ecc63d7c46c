"""The search index's SQLite page cache has a stated bound (search_index.CACHE_KIB), not SQLite's default
2,000 KiB that a long-running store filled a page at a time (its native memory growth in the soak)."""

from __future__ import annotations

import ctypes
import ctypes.util
import random
import sqlite3
import string
from pathlib import Path

import pytest

from geode.records.search_index import CACHE_KIB, Entry, SearchIndex


def _sqlite_lib() -> ctypes.CDLL:
    """The SQLite library the sqlite3 module uses (same soname: the instance already loaded)."""
    name = ctypes.util.find_library("sqlite3")
    if name is None:
        pytest.skip("no shared libsqlite3")
    lib = ctypes.CDLL(name)
    lib.sqlite3_libversion.restype = ctypes.c_char_p
    lib.sqlite3_memory_used.restype = ctypes.c_int64
    if lib.sqlite3_libversion().decode() != sqlite3.sqlite_version:
        pytest.skip("the sqlite3 module is not linked to the shared libsqlite3")
    return lib


def _entries(n: int) -> list[Entry]:
    rnd = random.Random(7)
    words = ["".join(rnd.choices(string.ascii_lowercase, k=rnd.randint(3, 9))) for _ in range(5000)]
    return [
        Entry(
            f"turn:t{i:06d}",
            "turn",
            f"s{i:06d}",
            f"t{i:06d}",
            "operator",
            float(i),
            " ".join(rnd.choices(words, k=12)),
            " ".join(rnd.choices(words, k=60)),
        )
        for i in range(n)
    ]


def test_the_page_cache_is_set_on_both_opens(tmp_path: Path) -> None:
    index = SearchIndex(tmp_path / "search.sqlite").open()
    assert index._c().execute("PRAGMA cache_size").fetchone()[0] == -CACHE_KIB
    index.close()
    reader = SearchIndex(tmp_path / "search.sqlite").open_readonly()
    assert reader._c().execute("PRAGMA cache_size").fetchone()[0] == -CACHE_KIB
    reader.close()


def test_an_index_past_the_bound_holds_no_more_memory(tmp_path: Path) -> None:
    lib = _sqlite_lib()
    index = SearchIndex(tmp_path / "search.sqlite").open()
    before = lib.sqlite3_memory_used()
    for e in _entries(2500):  # ~3 MB of file: SQLite's default cache would hold ~2,200 KiB of it
        index.put([e])
    grown_kib = (lib.sqlite3_memory_used() - before) / 1024
    assert index.query("a*", "operator", 5)
    index.close()
    assert grown_kib < CACHE_KIB * 1.6, f"SQLite holds +{grown_kib:.0f} KiB for one index"
