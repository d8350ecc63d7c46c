"""``[schedule]`` of ``config.toml``: the scheduler's settings and the operator's declarative jobs
(``[[schedule.jobs]]``). A leaf: it imports only the job model."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, StrictBool, field_validator

from geode.schedule.jobs import JobSpec

DEFAULT_GRACE_S = 60.0


class ScheduleSection(BaseModel):
    """The scheduler's knobs and the jobs the operator declares (always ``origin = "operator"``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    enabled: StrictBool = True  # false: the daemon starts no scheduler child (the ledger stays readable)
    # an instant first seen more than this after its fire time was missed: the job's catch-up policy decides
    grace_s: float = Field(default=DEFAULT_GRACE_S, ge=0, le=86_400)
    # (the ledger's retention is the store's: [records] schedule_retention_days and schedule_keep_per_job)
    jobs: list[JobSpec] = Field(default_factory=list)

    @field_validator("jobs")
    @classmethod
    def _operator_jobs(cls, jobs: list[JobSpec]) -> list[JobSpec]:
        seen: dict[str, int] = {}
        for i, job in enumerate(jobs):
            if job.origin != "operator":
                raise ValueError(f"jobs[{i}] ({job.name}): a job in config.toml is the operator's (origin)")
            if job.name in seen:
                raise ValueError(f"jobs[{seen[job.name]}] and jobs[{i}] are both named {job.name!r}")
            seen[job.name] = i
        return jobs
