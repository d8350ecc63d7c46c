"""Two schedulers in two processes against one real store child (over the bus): they race for the same
instants and no instant fires twice; a stopped (SIGSTOP) scheduler's claim is taken over once its lease
expires, and its due is then refused by name when it wakes up."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from actors.bus import Bus
from geode.home import GeodeHome
from geode.records.schedule_client import LedgerClient
from geode.records.schedule_models import ClaimKind, ClaimLost
from geode.records.store_client import StoreClient
from geode.schedule.occurrences import OccurrenceId
from tests.processes import Child
from tests.records.harness import ROOT
from tests.waiting import poll_for

T0 = datetime(2027, 10, 31, 0, 0, tzinfo=UTC)
N = 40


@pytest.fixture
def claimant(bus_store: tuple[GeodeHome, StoreClient]) -> Iterator[Child]:
    home, _ = bus_store
    proc = Child(
        [sys.executable, "-m", "tests.records.ledger_claimant", str(home.root)],
        cwd=ROOT,
        env={**os.environ, "GEODE_HOME": str(home.root)},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        bufsize=1,
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        yield proc
    finally:
        proc.send_signal(signal.SIGCONT)
        proc.kill()
        proc.wait(10)


def ask(proc: Child, line: str) -> str:
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(line + "\n")
    proc.stdin.flush()
    return proc.stdout.readline().strip()


def test_two_scheduler_processes_never_fire_one_instant_twice(
    bus_store: tuple[GeodeHome, StoreClient], claimant: Child
) -> None:
    home, _ = bus_store
    bus = Bus("scheduler", 1, home).start()
    try:
        ours = LedgerClient(bus.transport, timeout_s=10.0)
        fired_here: list[int] = []

        def race() -> None:
            for i in range(N):
                occ = OccurrenceId(job="race", instant=T0 + timedelta(hours=i))
                if ours.claim(occ, holder="scheduler:test").fire:
                    ours.due(occ, holder="scheduler:test")
                    fired_here.append(i)

        assert claimant.stdin is not None and claimant.stdout is not None
        claimant.stdin.write(f"race race {T0.isoformat()} {N}\n")
        claimant.stdin.flush()
        racer = threading.Thread(target=race)
        racer.start()
        fired_there = []
        while (line := claimant.stdout.readline().strip()) != "end":
            assert line.startswith("fired "), line
            fired_there.append(int(line.split()[1]))
        racer.join(30)
        assert not set(fired_here) & set(fired_there), "an instant fired in both schedulers"
        assert sorted(fired_here + fired_there) == list(range(N))
        runs = ours.runs("race", limit=N)
        assert len(runs.occurrences) == N
        assert all([s.outcome.kind for s in row.history] == ["due"] for row in runs.occurrences)
        theirs = {row.instant for row in runs.occurrences if row.holder.startswith("claimant:")}
        assert theirs == {T0 + timedelta(hours=i) for i in fired_there}
        assert ours.jobs()[0].cursor.last_instant == T0 + timedelta(hours=N - 1)

        # a stopped scheduler: its lease expires, the claim is taken over, and its due is refused on waking
        when = T0 + timedelta(days=30)
        occ = OccurrenceId(job="race", instant=when)
        assert ask(claimant, f"claim race {when.isoformat()} 2") == "claimed"
        claimant.send_signal(signal.SIGSTOP)
        assert ours.claim(occ, holder="scheduler:test").kind == ClaimKind.HELD
        poll_for(
            lambda: ours.claim(occ, holder="scheduler:test").kind == ClaimKind.CLAIMED,
            10.0,
            what="the stopped scheduler's lease to expire",
        )
        ours.due(occ, holder="scheduler:test")
        claimant.send_signal(signal.SIGCONT)
        assert ask(claimant, f"due race {when.isoformat()}") == ClaimLost.tag
        taken = ours.occurrence(occ)
        assert taken is not None and [s.outcome.kind for s in taken.history] == ["due"]
        assert taken.holder == "scheduler:test"
    finally:
        bus.stop()
