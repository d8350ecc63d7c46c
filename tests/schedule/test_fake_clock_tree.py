"""Time in a real `geode serve` tree, on the scheduler's fake clock (``GEODE_FAKE_CLOCK``, a file
the test rewrites; scripted model, no tools): down for 2 hours, each hourly job records exactly what its
catch-up policy names and an ``at`` inside the window runs once; a daily 02:30 Europe/Berlin job fires once
on the spring-forward day (at 03:00) and once on the fall-back day, an hourly ``30 * * * *`` at both 02:30s;
a wall clock jumping backwards fires nothing twice; two live schedulers on one store (the child SIGSTOPped
while a second process runs, then both) fire each instant once. Read back with `geode schedule runs --json`.
One tree, in file order."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from actors.cli.child_view import ask_child
from actors.tree.client import client_bus
from geode.home import GeodeHome
from geode.protocol import runtime
from geode.protocol import schedule as sched
from geode.records.schedule_client import LedgerClient
from geode.records.schedule_models import Runs
from geode.schedule.clock import ENV, write_clock
from geode.testing.scripted import ScriptedServer
from tests.actors.tree_kit import (
    ROOT,
    children,
    env,
    geode,
    scripted_home,
    serve,
    stop,
    wait_children,
    wait_for,
)

T0 = datetime(2026, 3, 28, 21, 30, tzinfo=UTC)  # the evening before the spring-forward night in Berlin
JOBS = """
[[schedule.jobs]]
name = "h-skip"
cron = "0 * * * *"
prompt = "marker h-skip"
catch_up = "skip"
[[schedule.jobs]]
name = "h-once"
cron = "0 * * * *"
prompt = "marker h-once"
catch_up = "once"
[[schedule.jobs]]
name = "h-all"
cron = "0 * * * *"
prompt = "marker h-all"
catch_up = "all"
[[schedule.jobs]]
name = "at-one"
at = "2026-03-28T22:15:00Z"
prompt = "marker at-one"
[[schedule.jobs]]
name = "daily"
cron = "30 2 * * *"
tz = "Europe/Berlin"
prompt = "marker daily"
catch_up = "skip"
[[schedule.jobs]]
name = "hourly"
cron = "30 * * * *"
tz = "Europe/Berlin"
prompt = "marker hourly"
catch_up = "skip"
"""
TREE: dict[str, Any] = {"gate": threading.Event()}
TREE["gate"].set()


def _answer(req: Any) -> dict[str, str]:
    """The scripted model: "ok"; for the hourly job, once the test opens the gate (held: a run stays open)."""
    if "marker hourly" in json.dumps(req.body):
        TREE["gate"].wait(30.0)
    return {"text": "ok"}


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).astimezone(UTC)


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GeodeHome]:
    base = tmp_path_factory.mktemp("clock_tree")
    with ScriptedServer(_answer) as model:
        home = scripted_home(base, model, extra=JOBS)
        clock = home.root / "fake_clock"
        write_clock(clock, T0)
        TREE.update(model=model, clock=clock)
        try:
            with pytest.MonkeyPatch.context() as mp:
                mp.setenv(ENV, str(clock))
                serve(home)
            yield home
        finally:
            stop(home)


def status(home: GeodeHome) -> dict[str, Any]:
    got = ask_child(home, "scheduler", runtime.STATUS, runtime.StatusQuery(), runtime.StatusReply, 5.0)
    return dict(got["detail"]) if got is not None else {}


def set_clock(home: GeodeHome, when: datetime, *, seen: bool = True) -> None:
    """Move the fake clock; with ``seen``, return once the tree's scheduler ran a whole tick at ``when``."""
    write_clock(TREE["clock"], when)
    if seen:
        wait_for(
            lambda: ((t := status(home).get("ticked_at")) is not None and at(t) == when) or None,
            20.0,
            what=f"a scheduler tick at {when}",
        )


def ledger(home: GeodeHome, job: str) -> Runs:
    with client_bus(home) as bus:
        return LedgerClient(bus.transport).runs(job, limit=500)


def done_at(home: GeodeHome, job: str, instant: datetime) -> Runs | None:
    """The job's runs once its occurrence at ``instant`` ended."""
    r = ledger(home, job)
    return r if any(o.instant == instant and o.terminal for o in r.occurrences) else None


def wait_done(home: GeodeHome, job: str, instant: datetime, what: str) -> None:
    wait_for(lambda: done_at(home, job, instant), 20.0, what=f"{what} ({job} at {instant})")


def cli_runs(home: GeodeHome) -> dict[str, dict[str, list[dict[str, Any]]]]:
    """`geode schedule runs --json`, by job: the occurrences (oldest first) and the missed ranges."""
    r = geode(home, "schedule", "runs", "--limit", "500", "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    got = json.loads(r.stdout)
    assert got["truncated"] is False
    jobs: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for x in sorted(got["runs"], key=lambda x: x.get("instant") or ""):
        job = jobs.setdefault(x["job_id"], {"occ": [], "missed": []})
        job["occ" if x["type"] == "occurrence" else "missed"].append(x)
    return jobs


def instants(rows: list[dict[str, Any]]) -> list[datetime]:
    return [at(x["instant"]) for x in rows]


def asked(job: str) -> int:
    """How many model requests a job's turns made (one per turn: the scripted model answers at once)."""
    return sum(1 for r in TREE["model"].requests if f"marker {job}" in json.dumps(r.body))


def one_turn_per_instant(jobs: dict[str, dict[str, list[dict[str, Any]]]], job: str) -> list[datetime]:
    """The job's occurrences as `geode schedule runs` showed them: one row per instant, each recorded due once
    by one holder, none inside a missed range, and the model asked once per occurrence; their instants."""
    runs = jobs[job]
    got = instants(runs["occ"])
    assert len(got) == len(set(got)), got
    for row in runs["occ"]:
        dues = [s for s in row["history"] if s["outcome"]["kind"] == "due"]
        assert len(dues) == 1, row
        assert row["outcome"] == "done", row
    for m in runs["missed"]:
        assert not [t for t in got if at(m["missed"]["first"]) <= t <= at(m["missed"]["last"])], m
    assert asked(job) == len(got)
    return got


def test_down_for_two_hours_each_job_records_what_its_catch_up_names(tree: GeodeHome) -> None:
    home = tree
    set_clock(home, T0)  # the scheduler is up at T0 with every job anchored there
    old = children(home)["scheduler"]
    assert old.pid is not None
    os.kill(old.pid, signal.SIGSTOP)  # the host sleeps at T0 ...
    set_clock(home, at("2026-03-28T23:30:00Z"), seen=False)  # ... and wakes two hours later
    os.kill(old.pid, signal.SIGKILL)
    wait_children(
        home, lambda k: k["scheduler"].incarnation > old.incarnation and k["scheduler"].state == "running"
    )
    h22, h23 = at("2026-03-28T22:00:00Z"), at("2026-03-28T23:00:00Z")
    for job, last in (("h-once", h23), ("h-all", h23), ("at-one", at("2026-03-28T22:15:00Z"))):
        wait_done(home, job, last, "a run after the restart")
    set_clock(home, at("2026-03-28T23:30:01Z"))
    jobs = cli_runs(home)
    skip = jobs["h-skip"]
    assert skip["occ"] == []
    assert [
        (m["missed"]["count"], at(m["missed"]["first"]), at(m["missed"]["last"])) for m in skip["missed"]
    ] == [(2, h22, h23)]
    once = jobs["h-once"]
    assert instants(once["occ"]) == [h23] and [m["missed"]["count"] for m in once["missed"]] == [1]
    assert at(once["missed"][0]["missed"]["first"]) == h22
    everything = jobs["h-all"]
    assert instants(everything["occ"]) == [h22, h23] and everything["missed"] == []
    assert one_turn_per_instant(jobs, "at-one") == [at("2026-03-28T22:15:00Z")]
    assert one_turn_per_instant(jobs, "h-all") == [h22, h23]
    for job in ("h-skip", "h-once", "h-all", "hourly"):  # the rest of the file is the DST jobs'
        assert ask_child(home, "scheduler", sched.PAUSE, sched.PauseJob(name=job), sched.StateReply, 10.0)


def test_dst_nights_in_berlin(tree: GeodeHome) -> None:
    home = tree
    # spring forward (2026-03-29: 02:00 CET -> 03:00 CEST): 02:30 does not exist, the daily job fires at 03:00
    set_clock(home, at("2026-03-29T00:59:59Z"))
    assert ledger(home, "daily").occurrences == []
    set_clock(home, at("2026-03-29T01:00:01Z"), seen=False)
    wait_done(home, "daily", at("2026-03-29T01:00:00Z"), "the daily run at 03:00")
    set_clock(home, at("2026-03-29T02:30:01Z"))  # 04:30 CEST: nothing more that day
    # fall back (2026-10-25: 03:00 CEST -> 02:00 CET): the months between are one missed range
    set_clock(home, at("2026-10-25T00:00:00Z"))
    assert ask_child(home, "scheduler", sched.RESUME, sched.ResumeJob(name="hourly"), sched.StateReply, 10.0)
    first, second, later = at("2026-10-25T00:30:00Z"), at("2026-10-25T01:30:00Z"), at("2026-10-25T02:30:00Z")
    for t in (first, second, later):  # 02:30 CEST, 02:30 CET, 03:30 CET
        set_clock(home, t.replace(second=1), seen=False)
        wait_done(home, "hourly", t, "the hourly run")
    set_clock(home, later.replace(second=2))
    jobs = cli_runs(home)
    days = one_turn_per_instant(jobs, "daily")
    assert days == [at("2026-03-29T01:00:00Z"), first]  # once on each DST day
    assert [m["missed"]["count"] for m in jobs["daily"]["missed"]] == [209]  # March 30 .. October 24
    assert one_turn_per_instant(jobs, "hourly")[-3:] == [first, second, later]  # (before: 23:30 on March 28)


def test_a_wall_clock_jumping_backwards_fires_nothing_twice(tree: GeodeHome) -> None:
    home = tree
    for step in ("2026-10-25T00:20:00Z", "2026-10-25T02:30:05Z"):
        set_clock(home, at(step))  # back 2 h 10 min, then past the decided instants again
    nxt = at("2026-10-25T03:30:00Z")
    set_clock(home, nxt.replace(second=1), seen=False)
    wait_done(home, "hourly", nxt, "the next hourly run")
    jobs = cli_runs(home)
    got = one_turn_per_instant(jobs, "hourly")
    assert got[-4:] == [
        at("2026-10-25T00:30:00Z"),
        at("2026-10-25T01:30:00Z"),
        at("2026-10-25T02:30:00Z"),
        nxt,
    ]
    assert len(one_turn_per_instant(jobs, "daily")) == 2


def open_at(home: GeodeHome, job: str, instant: datetime) -> str | None:
    """The holder that recorded the job's occurrence at ``instant`` due, while it is not yet ended."""
    rows = [o for o in ledger(home, job).occurrences if o.instant == instant and o.history and not o.terminal]
    return rows[0].history[0].by if rows else None


def test_two_live_schedulers_on_one_store_fire_each_instant_once(tree: GeodeHome) -> None:
    home = tree
    first = children(home)["scheduler"]
    assert first.pid is not None
    gate = TREE["gate"]
    os.kill(first.pid, signal.SIGSTOP)
    holder = "scheduler#900:second"
    second = subprocess.Popen(
        [sys.executable, "-m", "tests.schedule.second_scheduler", holder],
        env={**env(home), ENV: str(TREE["clock"])},
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    said: list[str] = []  # what the second scheduler printed: ready, then the clock of each tick
    assert second.stdout is not None
    out = second.stdout
    reader = threading.Thread(target=lambda: said.extend(line.strip() for line in out), daemon=True)
    reader.start()
    try:
        wait_for(lambda: "ready" in said or None, 20.0, what="the second scheduler started")
        alone = [at("2026-10-25T04:30:00Z"), at("2026-10-25T05:30:00Z")]
        for t in alone:  # the tree's scheduler is stopped: the second one fires these
            set_clock(home, t.replace(second=1), seen=False)
            wait_done(home, "hourly", t, "the second scheduler's run")
        os.kill(first.pid, signal.SIGCONT)  # both live now, the first with its plan of before
        set_clock(home, alone[-1].replace(second=2))
        both = at("2026-10-25T06:30:00Z")
        gate.clear()  # the model holds this run's answer: its occurrence stays open while both look
        set_clock(home, both.replace(second=1), seen=False)
        owner = wait_for(lambda: open_at(home, "hourly", both), 20.0, what="the 06:30 run due")
        looked = both.replace(second=2)
        set_clock(home, looked)  # the tree's scheduler ticked after it was due ...
        wait_for(lambda: f"ticked {looked.isoformat()}" in said or None, 20.0, what="the second's tick")
        gate.set()  # ... and so did the second one: now the run may end
        wait_done(home, "hourly", both, "the run both schedulers saw due")
        set_clock(home, both.replace(second=3))
    finally:
        gate.set()
        os.kill(first.pid, signal.SIGCONT)
        second.terminate()
        second.wait(timeout=15)
        reader.join(timeout=5)
        out.close()
    jobs = cli_runs(home)
    got = one_turn_per_instant(jobs, "hourly")
    assert got[-3:] == [*alone, both]
    rows = {at(x["instant"]): x for x in jobs["hourly"]["occ"]}
    assert {rows[t]["history"][0]["by"] for t in alone} == {holder}
    assert {step["by"] for step in rows[both]["history"]} == {owner}  # the other one never touched it
