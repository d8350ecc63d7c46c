"""Job definitions: what an operator writes is accepted in its one spelling, bad input is one clear line, and
what only a new job must satisfy (an ``at`` ahead, a bound delivery chat, a model's tools) comes apart."""

from __future__ import annotations

import tomllib
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from pydantic import ValidationError

from geode.protocol.errors import ConfigError
from geode.schedule.jobs import JobError, check_new, parse_job
from geode.schedule.settings import ScheduleSection

NOW = datetime(2027, 5, 1, 12, tzinfo=UTC)
BASE = {"name": "backup", "prompt": "back up the notes"}


def _error(**spec: object) -> str:
    with pytest.raises(JobError) as err:
        parse_job({**BASE, **spec})
    text = str(err.value)
    assert "\n" not in text and "backup" in text
    assert isinstance(err.value, ConfigError)
    return text


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ({"cron": "61 * * * *"}, "cron = '61 * * * *': Bad minute"),
        ({"cron": "0 0 * *"}, "standard cron has 5 fields"),
        ({"cron": "0 0 0 * * *"}, "standard cron has 5 fields"),
        ({"cron": "0 9 * * *", "tz": "Mars/Olympus_Mons"}, "unknown time zone 'Mars/Olympus_Mons'"),
        ({"cron": "0 9 * * *", "tz": "../../etc/passwd"}, "unknown time zone"),
        ({"every": "soon"}, "'soon' is not an interval"),
        ({"every": 0}, "every"),
        ({}, "exactly one of cron, every, at (this one has none)"),
        ({"cron": "0 9 * * *", "every": 60}, "exactly one of cron, every, at (this one has 2)"),
        (
            {"every": 60, "overlap": "allow", "session": "named", "session_name": "log"},
            'needs session = "new"',
        ),
        ({"every": 60, "session": "named"}, "needs session_name"),
        ({"every": 60, "catch_up_max": 101}, "catch_up_max"),
        ({"every": 60, "jitter_s": 60}, "jitter_s (60) must be shorter than the interval"),
        ({"every": 60, "deliver": "telegram:#general"}, "a Telegram chat id is an integer"),
        ({"every": 60, "deliver": "irc:#x"}, "a chat is written platform:chat_id"),
        ({"every": 60, "retries": 3}, "retries"),
        ({"every": 60, "workspace": "rel/path"}, "workspace 'rel/path' is not an absolute path"),
    ],
)
def test_bad_input_is_one_line_naming_the_problem(spec: dict[str, object], says: str) -> None:
    assert says in _error(**spec)


def test_a_bad_job_name_is_one_line() -> None:
    with pytest.raises(JobError, match=r"'bad name' is not a job name") as err:
        parse_job({"name": "bad name", "every": 60, "prompt": "x"})
    assert "\n" not in str(err.value)


def test_spellings_are_normalised() -> None:
    spec = parse_job({**BASE, "every": "1h30m", "deliver": "telegram:-0100123"})
    assert spec.every == 5400 and spec.deliver is not None and spec.deliver.destination == "telegram:-100123"
    at = parse_job({**BASE, "at": "2027-10-31T02:30:00", "tz": "Europe/Berlin"})
    assert at.at == datetime(2027, 10, 31, 0, 30, tzinfo=UTC)  # a repeated local time: the first (fold=0)
    assert at.kind == "at" and spec.kind == "every" and spec.budget_s == 300.0
    assert spec.workspace_dir(Path("/h/workspaces")) == Path("/h/workspaces/job-backup")


def test_what_only_a_new_job_must_satisfy() -> None:
    past = parse_job({**BASE, "at": (NOW - timedelta(minutes=1)).isoformat()})
    with pytest.raises(JobError, match="is in the past"):
        check_new(past, NOW)
    check_new(parse_job({**BASE, "at": (NOW + timedelta(minutes=1)).isoformat()}), NOW)
    chat = parse_job({**BASE, "every": 60, "deliver": "slack:C0123ABCD"})
    with pytest.raises(JobError, match="unknown delivery chat slack:C0123ABCD"):
        check_new(chat, NOW, bound_chats={"telegram:-100"})
    check_new(chat, NOW, bound_chats={"slack:C0123ABCD"})
    denied = {"run_bash", "delegate_task"}
    by_model = parse_job({**BASE, "every": 60, "origin": "model", "allowed_tools": ["read_file", "run_bash"]})
    with pytest.raises(JobError, match="a job made by the model cannot allow run_bash"):
        check_new(by_model, NOW, model_denied=denied)
    by_operator = parse_job({**BASE, "every": 60, "allowed_tools": ["read_file", "run_bash"]})
    check_new(by_operator, NOW, model_denied=denied)


def test_the_schedule_section_takes_declarative_operator_jobs() -> None:
    text = """
    [schedule]
    grace_s = 30
    [[schedule.jobs]]
    name = "backup"
    cron = "30 2 * * *"
    tz = "Europe/Berlin"
    prompt = "back up"
    allowed_tools = ["run_bash"]
    [[schedule.jobs]]
    name = "digest"
    every = "1d"
    prompt = "summarise"
    session = "named"
    session_name = "digests"
    """
    section = ScheduleSection.model_validate(tomllib.loads(text)["schedule"])
    assert [j.name for j in section.jobs] == ["backup", "digest"] and section.grace_s == 30.0
    twice = tomllib.loads(text.replace('"digest"', '"backup"'))["schedule"]
    with pytest.raises(ValidationError, match="both named 'backup'"):
        ScheduleSection.model_validate(twice)
    claimed = {"jobs": [{**BASE, "every": 60, "origin": "model"}]}
    with pytest.raises(ValidationError, match="the operator's"):
        ScheduleSection.model_validate(claimed)


def test_a_relative_workspace_in_config_is_refused_at_the_check_in_one_line() -> None:
    from geode.config_schema import GeodeConfig

    job = {**BASE, "every": 60, "workspace": "jobs/backup"}
    with pytest.raises(ConfigError) as err:
        GeodeConfig.from_raw({"schedule": {"jobs": [job]}})
    text = err.value.message
    assert "\n" not in text and "[schedule] jobs[0]" in text and "~/jobs/backup" in text, text
    with pytest.raises(ConfigError, match="is not an absolute path"):
        GeodeConfig.from_raw({"schedule": {"heartbeat": {"enabled": True, "workspace": "beat"}}})
    assert parse_job({**BASE, "every": 60, "workspace": "~/jobs/backup"}).workspace == "~/jobs/backup"
