"""Messages of the schedule area (``schedule.*``, served by the ``scheduler`` child): what ``geode schedule``
and the ``schedule_job`` tool (through the executor) ask the scheduler, the single logical writer of job
definitions. The scheduler writes through the store's ledger requests (:mod:`geode.protocol.ledger`); a
reader with no daemon reads the ledger directly.

Every refusal is a one-line error (``bad_request``: an invalid or unacceptable job; ``not_found``: no such
job); nothing is stored when a request is refused.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from geode.protocol.catalog import message
from geode.records.schedule_models import JobEntry, OccurrenceRow, Runs
from geode.schedule.occurrences import JOB_NAME, REQUEST_ID

JobName = Field(pattern=f"^{JOB_NAME}$")


class AddJob(BaseModel):
    """Create (or, with ``replace``, redefine) a job. ``job`` is the job definition (a ``[[schedule.jobs]]``
    table's keys, validated by the scheduler as :class:`geode.schedule.jobs.JobSpec`); ``origin`` says who
    wrote it (``model``: a ``schedule_job`` call, which never goes beyond DAEMON's tool list);
    ``workspace`` is the creating session's workspace for a model job (its turns run there)."""

    job: dict[str, Any]
    origin: Literal["operator", "model"] = "operator"
    workspace: str | None = Field(default=None, min_length=1, max_length=4096)
    session_id: str = Field(default="", max_length=128)  # the creating session (a model job), for the record
    replace: bool = False  # an existing job of that name is refused unless this is set


class JobView(BaseModel):
    """One job as stored (definition, revision, creation instant) with its cursor, and its next instant."""

    entry: JobEntry
    next_instant: str | None = None  # ISO UTC; None: paused, disabled, or an ``at`` already decided
    declarative: bool = False  # from ``[[schedule.jobs]]`` in config.toml (``geode reload`` owns it)


class AddReply(BaseModel):
    job: JobView


class ListJobs(BaseModel):
    """Every job with its cursor and next instant (``geode schedule list``)."""


class JobsReply(BaseModel):
    jobs: list[JobView] = Field(default_factory=list)


class JobRef(BaseModel):
    """One job by name."""

    name: str = JobName


class ShowJob(JobRef):
    """One job with its most recent occurrences (``geode schedule show``)."""

    limit: int = Field(default=20, ge=1, le=500)


class ShowReply(BaseModel):
    job: JobView
    runs: Runs


class RemoveJob(JobRef):
    """Remove a job definition (its occurrences stay in the ledger until retention). A declarative job is
    removed from ``config.toml``, not here: refused with a one-line error naming the file."""


class RemoveReply(BaseModel):
    removed: bool


class PauseJob(JobRef):
    """Pause a job: no new instant fires while paused (an occurrence already due keeps its course)."""


class ResumeJob(JobRef):
    """Resume a paused (or failure-disabled) job; instants missed while paused follow its catch-up policy."""


class StateReply(BaseModel):
    job: JobView


class RunNow(JobRef):
    """Run a job once now. ``request_id`` is the caller's (the CLI makes one per command): a retried command
    with the same id is the same occurrence and one run."""

    request_id: str = Field(pattern=f"^{REQUEST_ID}$")


class RunNowReply(BaseModel):
    occurrence: OccurrenceRow
    duplicate: bool = False  # the request id was seen before: nothing new was submitted


class ListRuns(BaseModel):
    """Occurrences and missed ranges, newest first (one job's, or every job's) — ``geode schedule runs``."""

    name: str | None = Field(default=None, pattern=f"^{JOB_NAME}$")
    limit: int = Field(default=50, ge=1, le=500)


ADD = message("schedule.add", AddJob, AddReply)
LIST = message("schedule.list", ListJobs, JobsReply)
SHOW = message("schedule.show", ShowJob, ShowReply)
REMOVE = message("schedule.remove", RemoveJob, RemoveReply)
PAUSE = message("schedule.pause", PauseJob, StateReply)
RESUME = message("schedule.resume", ResumeJob, StateReply)
RUN_NOW = message("schedule.run_now", RunNow, RunNowReply)
RUNS = message("schedule.runs", ListRuns, Runs)
