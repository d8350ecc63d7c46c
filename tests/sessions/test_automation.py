"""An AUTOMATION session for a scheduled job's occurrence (geode.sessions.automation): the mode's 300 s
budget, DAEMON's tool list with computer use never, an operator job's explicit extras (run without an
approval), a model job held to DAEMON's list (refused at creation), the job's own workspace and session."""

from __future__ import annotations

import stat
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from geode.config_schema import GeodeConfig
from geode.home import GeodeHome
from geode.protocol import turns
from geode.schedule.jobs import JobError, JobSpec, check_new, parse_job
from geode.sessions.automation import job_session, job_turn_settings, model_denied
from geode.sessions.modes import default_denylist
from geode.sessions.turn_setup import compose_turn
from geode.tools.builtin.catalogue import builtin_specs
from geode.tools.plan import BoundToolPlan, PlanRegistry

OCC = "backup@2027-01-01T00:00:00Z"
COMPUTER_ON = GeodeConfig.from_raw({"daemon": {"allow_computer_use": True}})


class Plans:
    """The plan source a tree child has (``CataloguePlans``): the executor's catalogue."""

    def __init__(self, plan: BoundToolPlan) -> None:
        self.plan, self.from_executor = plan, True

    def base(self) -> BoundToolPlan:
        return self.plan


def _catalogue() -> BoundToolPlan:
    return PlanRegistry().compile(builtin_specs())


def _job(**kw: Any) -> JobSpec:
    return parse_job({"name": "backup", "every": "1m", "prompt": "back up", **kw})


def _turn(home: GeodeHome, job: JobSpec, config: GeodeConfig, occurrence: str = OCC) -> Any:
    catalogue = _catalogue()
    settings = job_turn_settings(
        job, occurrence=occurrence, config=config, home=home, plans=Plans(catalogue), env={}
    )
    run = turns.TurnRun(
        turn_id="t1", session_id=settings["session_id"], mode=settings["mode"], settings=settings
    )
    return settings, compose_turn(run, config, catalogue=catalogue, rules_dir=home.rules_dir)


def test_a_job_runs_in_automation_with_300s_daemons_list_and_no_computer(tmp_path: Path) -> None:
    home = GeodeHome(tmp_path / "h").ensure()
    settings, turn = _turn(home, _job(), COMPUTER_ON)  # even with [daemon] allow_computer_use = true
    names = turn.plan.tool_names
    assert settings["mode"] == turn.settings.mode == "AUTOMATION" and settings["origin"] == "scheduler"
    assert turn.settings.time_budget_s == 300.0
    daemon = default_denylist("DAEMON", plan_tools=builtin_specs())  # DAEMON's list (without the opt-in)
    assert daemon <= set(turn.settings.denied_tools) and not turn.settings.granted_tools
    assert "computer" in daemon and "computer" in turn.settings.denied_tools and "computer" not in names
    assert "run_bash" not in names and "delegate_task" not in names and "read_file" in names
    # its own workspace, made 0700 on the first run; the prompt's sources read it
    ws = home.root / "workspaces" / "job-backup"
    assert turn.settings.workspace == str(ws.resolve()) and stat.S_IMODE(ws.stat().st_mode) == 0o700
    assert turn.prompt.workspace == ws.resolve()
    assert settings["plan_hash"] == turn.plan.content_hash  # the plan the worker compiles is the one composed


def test_budget_model_and_sessions_follow_the_job(tmp_path: Path) -> None:
    home = GeodeHome(tmp_path / "h").ensure()
    cfg = GeodeConfig()
    job = _job(budget_s=42, model="claude-haiku-4-5")
    one = job_session(job, occurrence=OCC, config=cfg, home=home, env={})
    again = job_session(job, occurrence=OCC, config=cfg, home=home, env={"GEODE_MODEL": "claude-sonnet-4-5"})
    later = job_session(job, occurrence="backup@2027-01-01T00:01:00Z", config=cfg, home=home, env={})
    assert one.time_budget_s == 42 and one.model == again.model == "claude-haiku-4-5"
    assert one.session_id == again.session_id != later.session_id  # a resubmission: the same session
    assert one.session_id.startswith("s-job-backup-20270101T000000Z-")
    named = _job(session="named", session_name="notes")
    first = job_session(named, occurrence=OCC, config=cfg, home=home, env={})
    second = job_session(named, occurrence="backup@now:req-1", config=cfg, home=home, env={})
    assert first.session_id == second.session_id  # one session that accumulates
    other_home = GeodeHome(tmp_path / "h2").ensure()  # keyed: another home computes another id
    assert (
        job_session(named, occurrence=OCC, config=cfg, home=other_home, env={}).session_id != first.session_id
    )
    with pytest.raises(ValueError, match="not one of job"):
        job_session(job, occurrence="other@2027-01-01T00:00:00Z", config=cfg, home=home, env={})


def test_an_operator_job_names_run_bash_and_it_runs_unasked_but_never_computer(tmp_path: Path) -> None:
    home = GeodeHome(tmp_path / "h").ensure()
    job = _job(
        allowed_tools=["run_bash", "write_file", "computer", "schedule_job"], workspace=str(tmp_path / "mine")
    )
    settings, turn = _turn(home, job, COMPUTER_ON)
    # its allowlist, minus computer use and schedule_job (a job never makes jobs)
    assert set(turn.plan.tool_names) == {"write_file", "run_bash"}
    assert set(turn.settings.granted_tools) == {"run_bash", "write_file"}
    assert "run_bash" not in turn.settings.denied_tools and "computer" in turn.settings.denied_tools
    assert turn.settings.workspace == str((tmp_path / "mine").resolve()) and (tmp_path / "mine").is_dir()
    assert set(settings["visible_tools"]) == {"write_file", "run_bash"}


def test_a_model_job_never_goes_beyond_daemons_list(tmp_path: Path) -> None:
    home = GeodeHome(tmp_path / "h").ensure()
    denied = model_denied(GeodeConfig(), builtin_specs())
    made = _job(allowed_tools=["read_file", "run_bash"], origin="model", workspace=str(tmp_path / "s"))
    with pytest.raises(JobError) as err:
        check_new(made, datetime(2027, 1, 1, tzinfo=UTC), model_denied=denied)
    why = "schedule job 'backup': a job made by the model cannot allow run_bash (operator only)"
    assert str(err.value).endswith(why) and "\n" not in str(err.value)
    assert "computer" in denied and "delegate_task" in denied and "read_file" not in denied
    # were one stored anyway, its turn still has no run_bash and grants nothing
    _, turn = _turn(home, made, COMPUTER_ON)
    assert turn.plan.tool_names == ("read_file",) and turn.settings.granted_tools == ()
    assert turn.settings.workspace == str((tmp_path / "s").resolve())  # the creating session's workspace
