"""A child's C heap: one glibc arena however many threads allocate (the executor's per-call threads had each
kept freed memory in an arena of its own: +5 MiB RSS per 1,000 turns), and a trimmer that runs on its own."""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from actors.tree import c_heap

ROOT = Path(__file__).resolve().parents[2]
# Six threads alive at once, each allocating (malloc-sized bytearrays: above pymalloc's 512 bytes, below the
# mmap threshold), then glibc's own report of its arenas (malloc_info: one <heap> per arena).
ARENAS_SCRIPT = """
import ctypes, sys, tempfile, threading
from actors.tree import c_heap
if sys.argv[1] == "configured":
    c_heap.configure()
barrier, keep = threading.Barrier(6), []
def work():
    barrier.wait()
    keep.append([bytearray(4000) for _ in range(200)])
    barrier.wait()
threads = [threading.Thread(target=work) for _ in range(6)]
for t in threads: t.start()
for t in threads: t.join()
libc = ctypes.CDLL(None)
libc.fopen.restype = ctypes.c_void_p
libc.fopen.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
libc.malloc_info.argtypes = [ctypes.c_int, ctypes.c_void_p]
libc.fclose.argtypes = [ctypes.c_void_p]
with tempfile.NamedTemporaryFile(suffix=".xml") as f:
    fp = libc.fopen(f.name.encode(), b"w")
    libc.malloc_info(0, fp)
    libc.fclose(fp)
    print(open(f.name).read().count("<heap nr="))
"""

glibc = pytest.mark.skipif(c_heap._libc() is None, reason="glibc only")


def _arenas(mode: str) -> int:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MALLOC_", "GEODE_MALLOC"))}
    out = subprocess.run(
        [sys.executable, "-c", ARENAS_SCRIPT, mode],
        cwd=ROOT,
        env={**env, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    return int(out.stdout.strip())


@glibc
def test_a_configured_child_keeps_one_arena_however_many_threads_allocate() -> None:
    assert _arenas("plain") > 2  # glibc's default: an arena per thread (what the executor had)
    assert _arenas("configured") == 1


def test_the_trimmer_trims_on_its_own_and_stops() -> None:
    trimmed = threading.Semaphore(0)

    def trim() -> int:
        trimmed.release()
        return 1

    t = c_heap.MallocTrimmer(every_s=0.01, trim=trim).start()
    try:
        assert all(trimmed.acquire(timeout=5) for _ in range(3))
    finally:
        t.stop()
    assert t.trims >= 3
    assert c_heap.MallocTrimmer(every_s=0, trim=trim).start()._thread is None  # 0 turns it off


@glibc
def test_an_explicit_malloc_arena_max_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MALLOC_ARENA_MAX", "4")
    assert c_heap.limit_arenas(1) is False
    monkeypatch.delenv("MALLOC_ARENA_MAX")
    monkeypatch.setenv("GEODE_MALLOC_ARENAS", "0")
    assert c_heap.limit_arenas() is False
    assert ctypes.CDLL(None).malloc_trim(0) in (0, 1)  # the symbol the trimmer calls exists


def test_one_housekeeping_thread_runs_the_tick_and_trims_on_its_own_period() -> None:
    ticks, trimmed = threading.Semaphore(0), threading.Semaphore(0)

    def trim() -> int:
        trimmed.release()
        return 1

    hourly = c_heap.MallocTrimmer(every_s=3600, trim=trim, tick=ticks.release, tick_s=0.01).start()
    try:  # ticks every 0.01 s, no trim before its hour
        assert all(ticks.acquire(timeout=5) for _ in range(5))
        assert hourly.trims == 0
    finally:
        hourly.stop()
    both = c_heap.MallocTrimmer(every_s=0.01, trim=trim, tick=ticks.release, tick_s=0.01).start()
    try:
        assert all(trimmed.acquire(timeout=5) and ticks.acquire(timeout=5) for _ in range(3))
    finally:
        both.stop()
    off = c_heap.MallocTrimmer(every_s=0, trim=trim, tick=ticks.release, tick_s=0.01).start()
    try:  # trimming off (GEODE_MALLOC_TRIM_S=0) never turns the supervisor-death check off
        assert all(ticks.acquire(timeout=5) for _ in range(3))
        assert off.trims == 0
    finally:
        off.stop()


# A supervised child as child_main arms it: the parent check runs on the trimmer's thread (no parent-watch
# thread of its own), and once the supervisor is gone (getppid differs) that thread exits the process with 70.
ORPHAN_SCRIPT = """
import os, sys, threading, time
from actors.tree import c_heap
from actors.tree.child_guard import parent_check
c_heap.configure(tick=parent_check())
print(sorted(t.name for t in threading.enumerate()), flush=True)
os.getppid = lambda: 1  # as after the supervisor's death (the prctl signal is the first net, not tested here)
time.sleep(10)
sys.exit(0)
"""


def test_a_child_checks_its_supervisor_on_its_one_housekeeping_thread() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MALLOC_", "GEODE_MALLOC"))}
    env.update(PYTHONPATH=str(ROOT), GEODE_SUPERVISOR_PID=str(os.getpid()))
    out = subprocess.run(
        [sys.executable, "-c", ORPHAN_SCRIPT], cwd=ROOT, env=env, capture_output=True, text=True, timeout=30
    )
    assert out.stdout.strip() == "['MainThread', 'housekeeping']", out.stderr
    assert out.returncode == 70
