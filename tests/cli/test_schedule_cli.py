"""`geode schedule` with no daemon: `list`/`runs`/`show`/`runs --show` read what the occurrence ledger holds
(rows written first through the real store code, in-process), `geode doctor` flags disabled and failing jobs,
and `add` refuses each bad input in one line (exit 2) or says the daemon is down (exit 1), storing nothing."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from typer.testing import CliRunner

from actors.cli.main import build_app
from geode.home import GeodeHome
from geode.protocol.transport import LocalTransport
from geode.records.engine import RecordEngine
from geode.records.models import TurnRecord, TurnState
from geode.records.reader import RecordReader
from geode.records.schedule_client import LedgerClient
from geode.records.schedule_jobs import JobTable
from geode.records.service import StoreService
from geode.records.writer import GroupWriter
from geode.schedule.occurrences import OccurrenceId
from geode.schedule.outcomes import Done, Missed

T0 = datetime(2027, 3, 1, 8, 0, tzinfo=UTC)


def cli(home: GeodeHome, *args: str) -> tuple[int, str, str]:
    r = CliRunner().invoke(build_app(), list(args), env={"GEODE_HOME": str(home.root), "COLUMNS": "200"})
    return r.exit_code, r.stdout, r.stderr


def at(job: str, seconds: int) -> OccurrenceId:
    return OccurrenceId(job=job, instant=T0 + timedelta(seconds=seconds))


@pytest.fixture
def ledger_home(tmp_path: Path) -> GeodeHome:
    """A home whose ledger holds: ``backup`` (every 60 s) with a done run (its turn answered), a run still
    due and a missed range; ``weekly`` disabled; ``flaky`` with one failed run."""
    home = GeodeHome(tmp_path / "h").ensure()
    engine = RecordEngine.for_home(home).open()
    try:
        c = LedgerClient(LocalTransport({"store": StoreService(engine)}, sender="scheduler#1"), attempts=1)
        c.put_job("backup", {"name": "backup", "every": 60, "prompt": "Back up"}, created_at=T0)
        weekly = {"name": "weekly", "cron": "0 9 * * 1", "tz": "Europe/Berlin", "prompt": "Report"}
        c.put_job("weekly", weekly, created_at=T0)
        c.put_job("flaky", {"name": "flaky", "every": 3600, "prompt": "Try"}, created_at=T0)
        done, running, failed = at("backup", 60), at("backup", 120), at("flaky", 3600)
        for occ in (done, running, failed):
            assert c.claim(occ, holder="A").fire
            c.due(occ, holder="A")
        c.submitted(done, T0 + timedelta(seconds=60.25))
        c.outcome(done, Done(result="ok", reason="natural"), by="A")
        c.submitted(failed, T0 + timedelta(seconds=3601))
        c.outcome(failed, Done(result="error", reason="max_steps"), by="A")
        first, last = T0 + timedelta(seconds=180), T0 + timedelta(seconds=300)
        c.missed("backup", Missed(count=3, first=first, last=last), by="A")
        c.set_job_state("weekly", disabled=True, reason="5 failures in a row")
        answer = {"text": "backed up 3 files", "termination_reason": "natural"}
        engine.put_turn(
            TurnRecord(turn_id=done.turn_id, session_id="s-job", state=TurnState.DONE, outcome=answer)
        )
    finally:
        engine.close()
    return home


def test_list_and_runs_json_read_the_ledger_with_no_daemon(ledger_home: GeodeHome) -> None:
    code, out, err = cli(ledger_home, "schedule", "list", "--json")
    assert code == 0, err
    listed = json.loads(out)
    assert listed["source"] == "ledger"
    jobs = {j["name"]: j for j in listed["jobs"]}
    assert sorted(jobs) == ["backup", "flaky", "weekly"]
    assert jobs["backup"]["next_instant"] == "2027-03-01T08:06:00Z"  # the first after the missed range
    assert jobs["backup"]["last"]["outcome"] == "missed" and jobs["backup"]["last"]["missed"]["count"] == 3
    assert jobs["weekly"]["next_instant"] is None and jobs["weekly"]["state"].startswith("disabled")
    assert jobs["flaky"]["last"]["outcome_text"] == "done error (max_steps)"

    code, out, err = cli(ledger_home, "schedule", "runs", "backup", "--json")
    assert code == 0, err
    runs = json.loads(out)["runs"]
    assert [r["outcome"] for r in runs] == ["missed", "due", "done"]  # newest first
    due, done = runs[1], runs[2]
    assert due["occurrence_id"] == "backup@2027-03-01T08:02:00Z" and due["lag_s"] is None
    assert done["lag_s"] == pytest.approx(0.25) and done["turn_id"] == at("backup", 60).turn_id
    assert done["outcome_text"] == "done ok (natural)"

    code, out, err = cli(ledger_home, "schedule", "runs", "--limit", "2", "--json")  # every job's, cut
    cut = json.loads(out)
    assert [r["outcome"] for r in cut["runs"]] == ["done", "missed"] and cut["truncated"]

    code, out, err = cli(ledger_home, "schedule", "runs", "--show", "backup@2027-03-01T08:01:00Z", "--json")
    assert code == 0, err
    shown = json.loads(out)
    assert shown["answer"] == "backed up 3 files" and shown["turn_state"] == "done"

    code, out, err = cli(ledger_home, "schedule", "runs")  # every job's, as text
    assert code == 0, err
    assert "unacked" in out and "0.250s" in out and "flaky@2027-03-01T09:00:00Z" in out

    code, out, err = cli(ledger_home, "schedule", "runs", "--show", "backup@2027-03-01T09:00:00Z")
    assert code == 2 and "no occurrence backup@2027-03-01T09:00:00Z" in err and len(err.splitlines()) == 1


def test_doctor_flags_disabled_and_failing_jobs(ledger_home: GeodeHome) -> None:
    code, out, _err = cli(ledger_home, "doctor", "--json")
    checks = [ch for ch in json.loads(out)["checks"] if ch["name"] == "schedule"]
    disabled = [ch for ch in checks if "weekly" in ch["detail"]]
    failing = [ch for ch in checks if "flaky" in ch["detail"]]
    assert len(checks) == 2 and not disabled[0]["ok"] and "5 failures in a row" in disabled[0]["detail"]
    assert failing[0]["warn"] and "failed its last 1 runs" in failing[0]["detail"]
    assert code == 1  # a disabled job is an error


BAD = [
    (["--cron", "61 * * * *"], "cron = '61 * * * *'"),
    (["--cron", "0 9 * * *", "--tz", "Mars/Olympus"], "unknown time zone 'Mars/Olympus'"),
    (["--at", "2020-01-01T00:00:00"], "is in the past"),
    (["--every", "5m", "--deliver", "telegram:-1001234"], "unknown delivery chat telegram:-1001234"),
    (["--every", "soon"], "is not an interval"),
    (["--every", "5m", "--workspace", "rel/path"], "workspace 'rel/path' is not an absolute path"),
]


@pytest.mark.parametrize(
    ("flags", "named"), BAD, ids=["cron", "zone", "at-past", "chat", "every", "workspace"]
)
def test_add_bad_input_is_one_line_and_stores_nothing(tmp_path: Path, flags: list[str], named: str) -> None:
    home = GeodeHome(tmp_path / "h").ensure()
    code, out, err = cli(home, "schedule", "add", "job1", "--prompt", "hi", *flags)
    assert code == 2 and out == ""
    assert len(err.splitlines()) == 1 and named in err and err.startswith("geode schedule add: "), err
    assert not _stored(home)


def test_add_with_no_daemon_says_so_and_stores_nothing(tmp_path: Path) -> None:
    home = GeodeHome(tmp_path / "h").ensure()
    code, out, err = cli(home, "schedule", "add", "job1", "--every", "5m", "--prompt", "hi")
    assert code == 1 and out == "" and len(err.splitlines()) == 1 and "daemon is not running" in err
    for cmd in (["run-now", "job1"], ["pause", "job1"], ["rm", "job1"]):
        code, _out, err = cli(home, "schedule", *cmd)
        assert code == 1 and "daemon is not running" in err
    assert not _stored(home)
    code, out, _err = cli(home, "schedule", "list", "--json")  # nothing was ever recorded here
    assert code == 0 and json.loads(out) == {"jobs": [], "source": "ledger"}


def _stored(home: GeodeHome) -> list[str]:
    if not (home.records_dir / "data.mdb").exists():
        return []
    with RecordReader.for_home(home) as reader:
        return [e.cursor.job_id for e in JobTable(reader.renv, GroupWriter(reader.renv)).jobs()]
