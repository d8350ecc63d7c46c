"""The optional built-in heartbeat (``[schedule.heartbeat]``): a declarative recurring job named ``heartbeat``
whose prompt is its workspace's ``HEARTBEAT.md``, read at each run. An answer of exactly ``HEARTBEAT_OK`` is
quiet (nothing posted, the occurrence ``done`` saying so); any other answer is delivered like a job's reply.
No ``HEARTBEAT.md`` (or an empty one): nobody is asked, the occurrence is ``done`` ok saying why."""

from __future__ import annotations

from pathlib import Path

from geode.schedule.jobs import PROMPT_MAX, JobError, JobSpec
from geode.schedule.outcomes import Done
from geode.schedule.settings import HEARTBEAT_JOB, HeartbeatSection, ScheduleSection

HEARTBEAT_FILE = "HEARTBEAT.md"
HEARTBEAT_OK = "HEARTBEAT_OK"
PLACEHOLDER = f"(read from {HEARTBEAT_FILE} in the job's workspace at each run)"
NO_FILE = f"not run: no {HEARTBEAT_FILE} in the heartbeat's workspace"
EMPTY_FILE = f"not run: {HEARTBEAT_FILE} is empty"


def heartbeat_spec(section: HeartbeatSection) -> JobSpec | None:
    """The heartbeat as a declarative job (None: disabled). A missed heartbeat is not caught up."""
    if not section.enabled:
        return None
    return JobSpec(
        name=HEARTBEAT_JOB,
        every=section.every,
        prompt=PLACEHOLDER,
        deliver=section.deliver,
        model=section.model,
        workspace=section.workspace,
        catch_up="skip",
    )


def declared_jobs(section: ScheduleSection) -> list[JobSpec]:
    """The declarative jobs the scheduler applies: ``[[schedule.jobs]]`` and, when enabled, the heartbeat."""
    beat = heartbeat_spec(section.heartbeat)
    return [*section.jobs, beat] if beat is not None else list(section.jobs)


def read_prompt(workspace: Path) -> str | None:
    """``HEARTBEAT.md``'s text (None: there is none); a one-line :class:`JobError` when it cannot be used."""
    path = workspace / HEARTBEAT_FILE
    try:
        with path.open(encoding="utf-8", errors="replace") as fh:
            text = fh.read(PROMPT_MAX + 1)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise JobError(f"{HEARTBEAT_FILE} cannot be read: {exc.strerror or exc}") from None
    if len(text) > PROMPT_MAX:
        raise JobError(f"{HEARTBEAT_FILE} is longer than {PROMPT_MAX} characters")
    return text


def is_quiet(text: str) -> bool:
    """Whether the model's answer is exactly ``HEARTBEAT_OK`` (surrounding whitespace aside)."""
    return text.strip() == HEARTBEAT_OK


def quiet(done: Done) -> Done:
    """The outcome of a quiet heartbeat: its turn's ``done``, saying nothing was posted."""
    return done.model_copy(update={"reason": f"{done.reason}: quiet ({HEARTBEAT_OK}), nothing posted"})
