"""Signals only enqueue: SIGTERM stops the tree gracefully (grace, then SIGKILL); a second SIGTERM forces."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

from tests.actors.supervision_kit import ROOT
from tests.actors.tree_kit import alive
from tests.processes import Child


def start(grace_ms: int) -> tuple[Child, list[int]]:
    p = Child(
        [sys.executable, "-m", "tests.actors.signal_runner", str(grace_ms)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert p.stdout is not None
    pids = [int(x) for x in p.stdout.readline().split()]
    assert len(pids) == 2
    return p, pids


def test_sigterm_graceful_then_grace_kill() -> None:
    p, pids = start(600)
    t0 = time.monotonic()
    p.send_signal(signal.SIGTERM)
    assert p.wait(10) == 0
    took = time.monotonic() - t0
    assert 0.55 < took < 5, took  # the hanging child got its grace, then SIGKILL
    assert not any(alive(x) for x in pids)


def test_second_sigterm_forces() -> None:
    p, pids = start(30_000)
    p.send_signal(signal.SIGTERM)  # graceful: the hang child ignores it and has a 30 s grace …
    assert p.stdout is not None and p.stdout.readline().strip() == "stopping"
    t0 = time.monotonic()
    p.send_signal(signal.SIGTERM)  # … so only the forced stop ends this quickly
    assert p.wait(10) == 0
    assert time.monotonic() - t0 < 3
    assert not any(alive(x) for x in pids)
