"""The scheduler child in a real `geode serve` tree (scripted model, the local Telegram Bot API): an operator
job ``every 1s`` in config.toml runs AUTOMATION turns whose occurrences end ``done`` in the ledger; after a
SIGKILL of the scheduler child its next incarnation fires no decided instant again (one turn per occurrence)
and leaves none silent (every instant from the first to the last decided has its row or range). A job that
delivers posts its reply to the bound chat exactly once (a retried run-now included). `geode reload` applies
a changed [[schedule.jobs]] list and the ledger keeps what it had. The tests share one tree, in file order."""

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
from geode.testing.bot_api_server import LocalBotApi
from geode.testing.scripted import ScriptedServer
from tests.actors.tree_kit import (
    children,
    geode,
    scripted_home,
    serve,
    status_children,
    stop,
    wait_children,
    wait_for,
)
from tests.messengers.chat_tree_kit import prompt_of

CHAT = -100777
TICK = """
[[schedule.jobs]]
name = "tick"
every = 1
prompt = "tick"
catch_up = "all"
"""
REPORT = f"""
[[schedule.jobs]]
name = "report"
every = "1d"
prompt = "report for the chat"
deliver = "telegram:{CHAT}"
"""
TREES: dict[str, Any] = {}
QUIET = "all is well here"  # a HEARTBEAT.md the scripted model answers HEARTBEAT_OK to


def _config(api: LocalBotApi, beat: str) -> str:
    return f"""
[schedule.heartbeat]
enabled = true
every = "1h"
deliver = "telegram:{CHAT}"
workspace = "{beat}"
[messengers.telegram]
base_url = "{api.base_url}"
poll_timeout_s = 1
[[messengers.bindings]]
platform = "telegram"
channel_id = "{CHAT}"
"""


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GeodeHome]:
    base = tmp_path_factory.mktemp("sched_tree")

    def answer(req: Any) -> dict[str, str]:
        said = prompt_of(req)
        return {"text": "HEARTBEAT_OK" if said == QUIET else f"echo: {said}"}

    with LocalBotApi() as api, ScriptedServer(answer) as model:
        home = scripted_home(base, model, extra=_config(api, str(base / "beat")) + TICK + REPORT)
        with home.env_file.open("a") as f:
            f.write(f"TELEGRAM_BOT_TOKEN={api.token}\n")
        TREES["api"], TREES["beat"] = api, base / "beat"
        try:
            with pytest.MonkeyPatch.context() as mp:  # the scheduler dies right after its 3rd due, once
                mp.setenv("GEODE_FAULTS", "scheduler@scheduler.after_due:kill:3")
                serve(home)
            yield home
        finally:
            stop(home)


def runs(home: GeodeHome, job: str = "tick") -> Runs | None:
    got = ask_child(home, "scheduler", sched.RUNS, sched.ListRuns(name=job, limit=500), Runs, 5.0)
    return Runs.model_validate(got) if got is not None else None


def done_rows(home: GeodeHome, n: int, job: str = "tick") -> Runs | None:
    r = runs(home, job)
    done = [o for o in r.occurrences if o.kind == "done"] if r is not None else []
    return r if len(done) >= n else None


def test_every_1s_job_runs_in_the_daemon_and_survives_a_scheduler_sigkill(tree: GeodeHome) -> None:
    home = tree
    assert status_children(home)["scheduler"]["state"] == "running"  # geode status shows it
    first = wait_for(lambda: done_rows(home, 3), 20.0, what="three done occurrences of the every-1s job")
    # the first incarnation was killed between recording the third due and submitting its turn: the next
    # one followed that occurrence to its outcome
    assert (home.root / "faults" / "scheduler.after_due.fired").exists()
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
        # an occurrence skipped for overlap (the previous turn still running: the first turns wait for the
        # loop workers, forked once the zygote has the SDKs) has a row and no turn; a due one has its turn
        due = [o for o in rows if any(step.outcome.kind == "due" for step in o.history)]
        turns: dict[str, Any] = {o.turn_id: store.get_turn(o.turn_id) for o in due}
    assert all(t is not None for t in turns.values()), "a due occurrence whose turn lanes never stored"
    assert len(turns) == len(due) >= decided_before + 3
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


def test_a_delivering_job_posts_its_reply_once_in_the_bound_chat(tree: GeodeHome) -> None:
    home, api = tree, TREES["api"]
    body = sched.RunNow(name="report", request_id="req-1")
    first = ask_child(home, "scheduler", sched.RUN_NOW, body, sched.RunNowReply, 10.0)
    assert first is not None and not first["duplicate"]
    row = wait_for(lambda: done_rows(home, 1, "report"), 20.0, what="the report occurrence done")
    again = ask_child(home, "scheduler", sched.RUN_NOW, body, sched.RunNowReply, 10.0)  # a retried command
    assert again is not None and again["duplicate"]
    assert [o.occurrence_id for o in row.occurrences] == ["report@now:req-1"]
    assert [o.kind.value for o in row.occurrences if o.kind] == ["done"]
    wait_for(lambda: api.posts(CHAT) or None, 10.0, what="the reply in the chat")
    texts = [p["text"] for p in api.posts(CHAT)]
    assert texts == ["echo: report for the chat"]  # posted exactly once


def test_reload_applies_the_changed_jobs_and_keeps_the_ledger(tree: GeodeHome) -> None:
    home = tree
    before = runs(home)
    assert before is not None and before.occurrences
    text = home.config_file.read_text().replace(TICK, TICK.replace('"tick"', '"tock"'))
    home.config_file.write_text(text)  # the job "tick" goes, a job "tock" comes
    r = geode(home, "reload", timeout=90)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "scheduler" in r.stdout
    wait_for(lambda: done_rows(home, 1, "tock"), 20.0, what="the new job's first done occurrence")
    listed = ask_child(home, "scheduler", sched.LIST, sched.ListJobs(), sched.JobsReply, 5.0)
    assert listed is not None
    assert sorted(j["entry"]["cursor"]["job_id"] for j in listed["jobs"]) == ["heartbeat", "report", "tock"]
    kept = runs(home)
    assert kept is not None
    ids = {o.occurrence_id for o in kept.occurrences}
    assert {o.occurrence_id for o in before.occurrences if o.terminal} <= ids  # the ledger kept its rows


def test_the_heartbeat_reads_heartbeat_md_and_posts_only_what_is_not_heartbeat_ok(tree: GeodeHome) -> None:
    home, api = tree, TREES["api"]
    beat = TREES["beat"]
    beat.mkdir(exist_ok=True)
    before = len(api.posts(CHAT))

    def run_now(req: str, n: int) -> Any:
        body = sched.RunNow(name="heartbeat", request_id=req)
        assert ask_child(home, "scheduler", sched.RUN_NOW, body, sched.RunNowReply, 10.0) is not None
        got = wait_for(lambda: done_rows(home, n, "heartbeat"), 20.0, what=f"heartbeat run {req} done")
        return next(o for o in got.occurrences if o.occurrence_id == f"heartbeat@now:{req}")

    (beat / "HEARTBEAT.md").unlink(missing_ok=True)
    row = run_now("b-1", 1)  # no HEARTBEAT.md: not run, and the outcome says so
    assert "no HEARTBEAT.md" in row.outcome.reason
    (beat / "HEARTBEAT.md").write_text(QUIET)
    row = run_now("b-2", 2)  # the model answered HEARTBEAT_OK: quiet
    assert row.outcome.result == "ok" and "quiet" in row.outcome.reason
    (beat / "HEARTBEAT.md").write_text("the disk is full")
    row = run_now("b-3", 3)
    assert row.outcome.reason == "natural"
    wait_for(lambda: len(api.posts(CHAT)) > before or None, 10.0, what="the heartbeat's reply in the chat")
    assert [p["text"] for p in api.posts(CHAT)][before:] == ["echo: the disk is full"]  # only that one
