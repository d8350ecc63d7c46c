"""A scheduled job's definition: when (``cron`` | ``every`` | ``at``, in an IANA time zone), what (prompt,
model, budget, tools, workspace), where the reply goes, and its session, overlap, catch-up, jitter and backoff
policies. ``JobSpec`` is what an operator (config or CLI) or the model writes; ``Job`` is the stored job, the
spec plus the creation instant an ``every`` interval is anchored at. Bad input: a one-line :class:`JobError`.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import (
    AfterValidator,
    AwareDatetime,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    model_validator,
)

from geode.messengers.config import PLATFORMS, Platform, canonical_destination
from geode.protocol.errors import ConfigError
from geode.schedule.occurrences import JOB_NAME

AUTOMATION_BUDGET_S = 300.0  # AUTOMATION mode's default time budget (DESIGN §6)
MAX_BUDGET_S = 86_400.0
CATCH_UP_DEFAULT = 10
CATCH_UP_CAP = 100  # hard cap of catch_up = "all"
MAX_JITTER_S = 3600
MAX_EVERY_S = 366 * 86_400
PROMPT_MAX = 20_000
_JOB_NAME = re.compile(JOB_NAME)
_DURATION = re.compile(r"(?:(?P<d>[0-9]+)d)?(?:(?P<h>[0-9]+)h)?(?:(?P<m>[0-9]+)m)?(?:(?P<s>[0-9]+)s)?")
_TOOL_NAME = r"^[A-Za-z0-9_.:\-]{1,128}$"
_SESSION_NAME = r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,63}$"

Kind = Literal["cron", "every", "at"]
Overlap = Literal["skip", "queue_one", "allow"]
CatchUp = Literal["skip", "once", "all"]
Origin = Literal["operator", "model"]


class JobError(ConfigError):
    """A job definition that cannot be accepted; the message is one line naming the job and the fix."""


def zone(name: str) -> ZoneInfo:
    """The IANA zone ``name``; ``ValueError`` in one line when there is no such zone."""
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise ValueError(
            f"unknown time zone {name!r}: use an IANA name such as Europe/Berlin or UTC"
        ) from None


def parse_every(value: object) -> object:
    """``every`` as whole seconds: an integer, or ``"90s"``, ``"5m"``, ``"1h30m"``, ``"1d"``."""
    if isinstance(value, str):
        text = value.strip().lower()
        m = _DURATION.fullmatch(text)
        if not text or m is None:
            raise ValueError(
                f"{value!r} is not an interval: write seconds or a duration such as 90s, 5m, 1h30m, 1d"
            )
        units = {"d": 86_400, "h": 3600, "m": 60, "s": 1}
        return sum(int(m.group(u) or 0) * n for u, n in units.items())
    return value


def _job_name(name: str) -> str:
    if not _JOB_NAME.fullmatch(name):
        raise ValueError(
            f"{name!r} is not a job name: letters, digits, _ . - (a letter or digit first), <= 64"
        )
    return name


class DeliveryTarget(BaseModel):
    """A chat the job's reply is posted to (shape only here; whether it is bound is checked on creation)."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    platform: Platform
    channel_id: str = Field(min_length=1, max_length=128)  # "<chat_id>[:<thread_id>]", canonical

    @model_validator(mode="before")
    @classmethod
    def _from_text(cls, value: Any) -> Any:
        if isinstance(value, str):  # "telegram:-1001234567890"
            platform, _, channel = canonical_destination(value).partition(":")
            return {"platform": platform, "channel_id": channel}
        if isinstance(value, Mapping) and value.get("platform") in PLATFORMS:
            text = f"{value['platform']}:{value.get('channel_id', '')}"
            return {**value, "channel_id": canonical_destination(text).partition(":")[2]}
        return value

    @property
    def destination(self) -> str:
        return f"{self.platform}:{self.channel_id}"


class JobSpec(BaseModel):
    """One ``[[schedule.jobs]]`` entry, a ``geode schedule add`` or a ``schedule_job`` call."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    name: Annotated[str, AfterValidator(_job_name)]
    cron: str | None = None  # standard 5 fields, in ``tz``
    every: Annotated[int | None, BeforeValidator(parse_every)] = Field(default=None, ge=1, le=MAX_EVERY_S)
    at: datetime | None = None  # one instant; without an offset it is read in ``tz``
    tz: str = "UTC"
    prompt: str = Field(min_length=1, max_length=PROMPT_MAX)
    model: str | None = Field(default=None, min_length=1, max_length=200)  # None: the default model
    budget_s: float = Field(default=AUTOMATION_BUDGET_S, gt=0, le=MAX_BUDGET_S)
    deliver: DeliveryTarget | None = None
    session: Literal["new", "named"] = "new"  # a new session per run, or one named session that accumulates
    session_name: str | None = Field(default=None, pattern=_SESSION_NAME)
    overlap: Overlap = "skip"
    catch_up: CatchUp = "once"
    catch_up_max: int = Field(default=CATCH_UP_DEFAULT, ge=1, le=CATCH_UP_CAP)
    jitter_s: int = Field(default=0, ge=0, le=MAX_JITTER_S)
    paused: bool = False
    disable_after_failures: int = Field(default=5, ge=0, le=1000)  # 0: never disabled
    allowed_tools: list[Annotated[str, Field(pattern=_TOOL_NAME)]] | None = None  # None: AUTOMATION's list
    workspace: str | None = Field(default=None, min_length=1, max_length=4096)  # None: workspaces/job-<name>
    origin: Origin = "operator"

    @model_validator(mode="after")
    def _consistent(self) -> JobSpec:
        given = [k for k in ("cron", "every", "at") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError(
                f"a job has exactly one of cron, every, at (this one has {len(given) or 'none'})"
            )
        tz = zone(self.tz)
        if self.cron is not None:
            fields = self.cron.split()
            if len(fields) != 5:
                raise ValueError(
                    f"cron = {self.cron!r}: standard cron has 5 fields (minute hour day month weekday)"
                )
            from cronsim import CronSim, CronSimError  # lazily: the config schema imports this module

            try:
                CronSim(self.cron, datetime(2000, 1, 1, tzinfo=UTC))
            except (CronSimError, ValueError) as exc:
                raise ValueError(f"cron = {self.cron!r}: {exc}") from None
        if self.at is not None:
            at = self.at if self.at.tzinfo is not None else self.at.replace(tzinfo=tz, fold=0)
            object.__setattr__(self, "at", at.astimezone(UTC).replace(microsecond=0))
        if self.session == "named" and self.session_name is None:
            raise ValueError('session = "named" needs session_name')
        if self.session == "new" and self.session_name is not None:
            raise ValueError('session_name is for session = "named"; a new session per run has no name')
        if self.overlap == "allow" and self.session != "new":
            raise ValueError('overlap = "allow" needs session = "new": two runs cannot share one session')
        ws = self.workspace
        if ws is not None and ("\x00" in ws or not Path(ws).expanduser().is_absolute()):  # what a run accepts
            raise ValueError(
                f"workspace {ws!r} is not an absolute path: write one such as "
                f"~/jobs/{self.name} (or leave it out for workspaces/job-{self.name})"
            )
        if self.every is not None and self.jitter_s >= self.every:
            raise ValueError(f"jitter_s ({self.jitter_s}) must be shorter than the interval ({self.every} s)")
        return self

    @property
    def kind(self) -> Kind:
        return "cron" if self.cron is not None else "every" if self.every is not None else "at"

    @property
    def zone(self) -> ZoneInfo:
        return ZoneInfo(self.tz)  # validated; zoneinfo caches one object per name

    def workspace_dir(self, workspaces: Path) -> Path:
        """Where its turns run: the one the operator set, else ``<workspaces>/job-<name>``."""
        return Path(self.workspace) if self.workspace else workspaces / f"job-{self.name}"

    def stored(self, created_at: datetime) -> Job:
        """The job as stored, anchored at ``created_at`` (whole seconds, UTC)."""
        return Job(**self.model_dump(), created_at=created_at)


class Job(JobSpec):
    """A stored job: ``every`` instants are ``created_at + k * every`` (k >= 1), not the scheduler's start."""

    created_at: AwareDatetime

    @model_validator(mode="after")
    def _whole_seconds(self) -> Job:
        object.__setattr__(self, "created_at", self.created_at.astimezone(UTC).replace(microsecond=0))
        return self


def one_line(exc: ValidationError, name: object = None) -> str:
    """A validation error as one line: the first problem, where it is, and how many more there are."""
    errors = exc.errors(include_url=False)
    first = errors[0]
    where = ".".join(str(p) for p in first["loc"])
    msg = str(first["msg"]).removeprefix("Value error, ")
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    job = f"schedule job {name!r}" if isinstance(name, str) and name else "schedule job"
    return f"{job}: {where + ': ' if where else ''}{msg}{more}".replace("\n", " ")


def parse_job(data: Mapping[str, Any]) -> JobSpec:
    """A job spec from its TOML table, CLI flags or tool arguments; :class:`JobError` in one line."""
    try:
        return JobSpec.model_validate(data)
    except ValidationError as exc:
        raise JobError(one_line(exc, data.get("name"))) from None


def check_new(
    spec: JobSpec,
    now: datetime,
    *,
    bound_chats: Collection[str] | None = None,
    model_denied: Collection[str] = (),
) -> None:
    """What only a new job must satisfy, as a :class:`JobError`: an ``at`` still ahead of ``now``; a delivery
    chat among ``bound_chats`` ("platform:channel", when given); a model-created job naming no tool in
    ``model_denied`` (DAEMON's denylist: a model never grants more than a chat has)."""
    label = f"schedule job {spec.name!r}"
    if spec.at is not None and spec.at <= now:
        raise JobError(
            f"{label}: at = {spec.at.isoformat()} is in the past (now {now.astimezone(UTC).isoformat()})"
        )
    if spec.deliver is not None and bound_chats is not None and spec.deliver.destination not in bound_chats:
        dest = spec.deliver.destination
        raise JobError(f"{label}: unknown delivery chat {dest}: bind it under [[messengers.bindings]] first")
    if spec.origin == "model" and spec.allowed_tools is not None:
        beyond = sorted(set(spec.allowed_tools) & set(model_denied))
        if beyond:
            raise JobError(
                f"{label}: a job made by the model cannot allow {', '.join(beyond)} (operator only)"
            )
