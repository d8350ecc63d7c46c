"""actors/tree/pool_fill.py: before a fork, the holes of pymalloc's partly used pools are taken (so a
child's first allocations go to fresh pages), within a bound."""

from __future__ import annotations

import sys

import pytest

from actors.tree import pool_fill

pytestmark = pytest.mark.skipif(not hasattr(sys, "_debugmallocstats"), reason="CPython's pymalloc only")

SIZE = 144  # the block of a 100-byte bytes object (33 + 100 -> 144)


def _holes(n: int) -> list[bytes]:
    """``n`` blocks of SIZE allocated, every other one freed: holes in partly used pools."""
    made = [bytes([i % 251]) * 100 for i in range(2 * n)]
    return made[::2]


def test_fill_takes_the_free_blocks_of_partly_used_pools(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pool_fill, "_held", [])
    monkeypatch.setattr(pool_fill, "_held_bytes", 0)
    # no bound here: after a suite's other tests the smaller size classes can hold more free blocks than
    # MAX_BYTES, which would skip this one (the bound has its own test below)
    monkeypatch.setattr(pool_fill, "MAX_BYTES", 1 << 40)
    keep = _holes(5000)
    before = pool_fill.free_blocks()
    assert before[SIZE] >= 5000
    taken = pool_fill.fill(tails=False)
    assert taken >= before[SIZE] - (pool_fill.POOL_BYTES - pool_fill.POOL_HEADER) // SIZE  # a tail left
    after = pool_fill.free_blocks()
    assert after[SIZE] < before[SIZE] // 10  # what is left: the tail of a pool begun since
    assert keep


def test_fill_holds_at_most_max_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pool_fill, "_held", [])
    monkeypatch.setattr(pool_fill, "_held_bytes", 0)
    monkeypatch.setattr(pool_fill, "MAX_BYTES", 100_000)
    keep = _holes(5000)
    pool_fill.fill()
    assert pool_fill._held_bytes <= 100_000
    assert pool_fill.free_blocks()[SIZE] >= 5000  # too many for the bound: left as they were
    assert pool_fill.fill() >= 0 and pool_fill._held_bytes <= 100_000
    assert keep
