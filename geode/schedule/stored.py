"""How a job is kept in the ledger's job record: the spec's JSON (the store keeps it opaque) plus who owns it
(``declarative``: a ``[[schedule.jobs]]`` entry, which ``geode reload`` adds, changes and removes). Readers
without a daemon (``geode schedule list``) parse a record back with :func:`job_of`."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from pydantic import ValidationError

from geode.records.schedule_models import JobRecord
from geode.schedule.jobs import Job, JobError, JobSpec, one_line

DECLARATIVE = "declarative"  # keys of a stored definition beside the spec's own
ANCHOR = "anchored_at"  # a job whose timing changed: its instants start here (the record keeps its creation)
RESUMED = "resumed_at"  # the last resume: instants while the job was paused are not its occurrences
_OURS = (DECLARATIVE, ANCHOR, RESUMED)


def definition_of(
    spec: JobSpec,
    *,
    declarative: bool,
    anchored_at: datetime | None = None,
    resumed_at: datetime | None = None,
) -> dict[str, Any]:
    """The stored definition of ``spec`` (as given: the store redacts it before writing)."""
    out = {**spec.model_dump(mode="json", exclude_none=True), DECLARATIVE: declarative}
    for k, t in ((ANCHOR, anchored_at), (RESUMED, resumed_at)):
        if t is not None:
            out[k] = t.astimezone(UTC).isoformat()
    return out


def resumed_at(record: JobRecord | None) -> datetime | None:
    """When the job was last resumed (its instants start there), if ever."""
    text = record.definition.get(RESUMED) if record is not None else None
    return datetime.fromisoformat(text) if isinstance(text, str) else None


def spec_of(definition: dict[str, Any]) -> tuple[JobSpec, bool]:
    """A stored definition back as its spec and whether it is declarative; :class:`JobError` in one line."""
    data = {k: v for k, v in definition.items() if k not in _OURS}
    try:
        return JobSpec.model_validate(data), bool(definition.get(DECLARATIVE, False))
    except ValidationError as exc:
        raise JobError(one_line(exc, data.get("name"))) from None


def job_of(record: JobRecord) -> tuple[Job, bool]:
    """The stored job (anchored at the record's creation instant) and whether it is declarative."""
    spec, declarative = spec_of(record.definition)
    anchor = record.definition.get(ANCHOR)
    created = record.created_at
    if isinstance(anchor, str):
        created = max(created, datetime.fromisoformat(anchor))
    return spec.stored(created), declarative
