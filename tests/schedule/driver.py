"""A fake clock and a minimal scheduler loop over the pure planner: what a scheduler child would decide, tick
by tick, with the job's bound carried between ticks (as the ledger would store it)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from geode.schedule.jobs import Job, JobSpec
from geode.schedule.outcomes import Missed
from geode.schedule.planner import plan


@dataclass
class FakeClock:
    t: datetime

    def now(self) -> datetime:
        return self.t

    def advance(self, **delta: float) -> None:
        self.t += timedelta(**delta)

    def set(self, t: datetime) -> None:
        self.t = t


@dataclass
class Loop:
    """Decisions of one job over time: every instant run, every missed range row."""

    job: Job
    clock: FakeClock
    grace_s: float = 60.0
    bound: datetime | None = None
    runs: list[datetime] = field(default_factory=list)
    missed: list[Missed] = field(default_factory=list)

    def tick(self) -> None:
        p = plan(self.job, self.bound, self.clock.now(), grace_s=self.grace_s)
        self.runs.extend(p.run)
        self.missed.extend([p.missed] if p.missed else [])
        if p.decided_through is not None:
            assert self.bound is None or p.decided_through >= self.bound
            self.bound = p.decided_through

    def run_until(self, end: datetime, step: timedelta) -> None:
        """Tick every ``step`` (an up scheduler) until ``end``."""
        while self.clock.now() < end:
            self.clock.advance(seconds=step.total_seconds())
            self.tick()


def job(created: datetime, **spec: object) -> Job:
    fields: dict[str, object] = {"name": "j", "prompt": "do it", **spec}
    return JobSpec.model_validate(fields).stored(created.astimezone(UTC))


def local(tz: str, *args: int, fold: int = 0) -> datetime:
    from zoneinfo import ZoneInfo

    return datetime(*args, tzinfo=ZoneInfo(tz), fold=fold)  # type: ignore[misc]
