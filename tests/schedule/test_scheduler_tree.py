"""The scheduler child in a real `geode serve` tree (scripted model): an operator job ``every 1s`` in
config.toml runs AUTOMATION turns whose occurrences end ``done`` in the ledger; after a SIGKILL of the
scheduler child its next incarnation fires no decided instant again (one turn per occurrence) and leaves
none silent (every instant from the first to the last decided has its row or range)."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

import pytest

from actors.cli.child_view import ask_child
from actors.tree.client import client_bus
from geode.home import GeodeHome
from geode.protocol import schedule as sched
from geode.records.schedule_models import Runs
from geode.records.store_client import StoreClient
from tests.actors.tree_kit import children, scripted_tree, status_children, wait_children, wait_for

JOB = """
[[schedule.jobs]]
name = "tick"
every = 1
prompt = "tick"
catch_up = "all"
"""


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GeodeHome]:
    base = tmp_path_factory.mktemp("sched_tree")
    with scripted_tree(base, lambda req: {"text": "tock"}, extra=JOB) as (home, _server):
        yield home


def runs(home: GeodeHome) -> Runs | None:
    got = ask_child(home, "scheduler", sched.RUNS, sched.ListRuns(name="tick", limit=500), Runs, 5.0)
    return Runs.model_validate(got) if got is not None else None


def done_rows(home: GeodeHome, n: int) -> Runs | None:
    r = runs(home)
    done = [o for o in r.occurrences if o.kind == "done"] if r is not None else []
    return r if len(done) >= n else None


def test_every_1s_job_runs_in_the_daemon_and_survives_a_scheduler_sigkill(tree: GeodeHome) -> None:
    home = tree
    assert status_children(home)["scheduler"]["state"] == "running"  # geode status shows it
    first = wait_for(lambda: done_rows(home, 2), 20.0, what="two done occurrences of the every-1s job")
    assert all(o.outcome is not None and o.turn_id for o in first.occurrences)
    old = children(home)["scheduler"]
    os.kill(old.pid, signal.SIGKILL)
    wait_children(
        home, lambda k: k["scheduler"].incarnation > old.incarnation and k["scheduler"].state == "running"
    )
    decided_before = len([o for o in first.occurrences if o.terminal])
    after = wait_for(
        lambda: done_rows(home, decided_before + 3), 20.0, what="occurrences done after the restart"
    )
    rows = after.occurrences
    instants = [o.instant for o in rows if o.instant is not None]
    assert len(instants) == len(set(instants))  # one row per instant
    # no decided instant fired twice: one durable turn per due occurrence, each with its derived id
    with client_bus(home) as bus:
        store = StoreClient(bus.transport)
        turns: dict[str, Any] = {o.turn_id: store.get_turn(o.turn_id) for o in rows if o.history}
    assert all(t is not None for t in turns.values()), "a due occurrence whose turn lanes never stored"
    assert len(turns) == len([o for o in rows if o.history])
    # none silent: every second from the first instant to the last decided one has a row or a range
    decided = sorted(o.instant for o in rows if o.terminal and o.instant is not None)
    covered = set(instants)
    for m in after.missed:
        t = m.missed.first
        while t <= m.missed.last:
            covered.add(t)
            t += timedelta(seconds=1)
    expect: list[datetime] = []
    t = min(instants)
    while t <= decided[-1]:
        expect.append(t)
        t += timedelta(seconds=1)
    assert [x for x in expect if x not in covered] == []
    kinds = {o.kind.value for o in rows if o.terminal and o.kind is not None}
    assert kinds <= {"done", "skipped"} and "done" in kinds
