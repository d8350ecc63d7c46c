"""``[schedule]`` of ``config.toml``: the scheduler's settings and the operator's declarative jobs
(``[[schedule.jobs]]``). A leaf: it imports only the job model."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, StrictBool, field_validator

from geode.schedule.jobs import MAX_EVERY_S, DeliveryTarget, JobSpec, parse_every

DEFAULT_GRACE_S = 60.0
HEARTBEAT_JOB = "heartbeat"  # the built-in heartbeat's job name (reserved in [[schedule.jobs]])


class HeartbeatSection(BaseModel):
    """``[schedule.heartbeat]``: an optional built-in job whose prompt is its workspace's ``HEARTBEAT.md``."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    enabled: StrictBool = False
    every: Annotated[int, BeforeValidator(parse_every)] = Field(default=1800, ge=60, le=MAX_EVERY_S)
    deliver: DeliveryTarget | None = None  # a bound chat a non-HEARTBEAT_OK answer is posted to
    model: str | None = Field(default=None, min_length=1, max_length=200)  # None: the default model
    workspace: str | None = Field(
        default=None, min_length=1, max_length=4096
    )  # None: workspaces/job-heartbeat

    @field_validator("workspace")
    @classmethod
    def _absolute(cls, ws: str | None) -> str | None:
        if ws is not None and ("\x00" in ws or not Path(ws).expanduser().is_absolute()):  # as a job's
            raise ValueError(f"{ws!r} is not an absolute path: write one such as ~/jobs/heartbeat")
        return ws


class ScheduleSection(BaseModel):
    """The scheduler's knobs and the jobs the operator declares (always ``origin = "operator"``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    enabled: StrictBool = True  # false: the daemon starts no scheduler child (the ledger stays readable)
    # an instant first seen more than this after its fire time was missed: the job's catch-up policy decides
    grace_s: float = Field(default=DEFAULT_GRACE_S, ge=0, le=86_400)
    # (the ledger's retention is the store's: [records] schedule_retention_days and schedule_keep_per_job)
    jobs: list[JobSpec] = Field(default_factory=list)
    heartbeat: HeartbeatSection = HeartbeatSection()

    @field_validator("jobs")
    @classmethod
    def _operator_jobs(cls, jobs: list[JobSpec]) -> list[JobSpec]:
        seen: dict[str, int] = {}
        for i, job in enumerate(jobs):
            if job.origin != "operator":
                raise ValueError(f"jobs[{i}] ({job.name}): a job in config.toml is the operator's (origin)")
            if job.name == HEARTBEAT_JOB:
                raise ValueError(f"jobs[{i}]: {HEARTBEAT_JOB!r} is reserved for [schedule.heartbeat]")
            if job.name in seen:
                raise ValueError(f"jobs[{seen[job.name]}] and jobs[{i}] are both named {job.name!r}")
            seen[job.name] = i
        return jobs
