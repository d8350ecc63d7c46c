"""Occurrence ids and the turn ids derived from them (DESIGN §9): an occurrence is (job, scheduled instant in
UTC), or (job, request id) for a ``run-now``; its turn id is a pure function of the occurrence id, so a
resubmission after any crash is the same turn and lanes admits it once.

Ids follow the messenger scheme (:mod:`geode.messengers.sessions`): printable, at most 128 characters, the
same on every restart, with a short hash of the exact parts so cleaned or cut readable parts never collide.
"""

from __future__ import annotations

import hashlib
import re
from datetime import UTC, datetime

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, model_validator

MAX_ID = 128
JOB_NAME = r"[A-Za-z0-9][A-Za-z0-9_.\-]{0,63}"  # a job's name: readable inside every id derived from it
REQUEST_ID = r"[A-Za-z0-9][A-Za-z0-9_.:\-]{0,63}"  # a run-now request id (the CLI makes one per command)
_JOB_NAME = re.compile(JOB_NAME)
_REQUEST_ID = re.compile(REQUEST_ID)
_INSTANT = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z")
_UNSAFE = re.compile(r"[^A-Za-z0-9_.:\-]")
_HASH_HEX = 12  # 48 bits of the exact parts, as the messenger ids
RUN_NOW = "now:"


def utc_text(instant: datetime) -> str:
    """An instant as its stable UTC text, ``2027-10-31T00:30:00Z`` (whole seconds; sorts as it orders)."""
    if instant.tzinfo is None or instant.utcoffset() is None:
        raise ValueError(f"an instant needs a time zone, not {instant!r}")
    if instant.microsecond:
        raise ValueError(f"instants are whole seconds, not {instant.isoformat()}")
    return instant.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_utc_text(text: str) -> datetime:
    if not _INSTANT.fullmatch(text):
        raise ValueError(f"{text!r} is not an instant written YYYY-MM-DDTHH:MM:SSZ")
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)


class OccurrenceId(BaseModel):
    """One occurrence of a job: a scheduled ``instant`` (UTC, whole seconds) or a run-now ``request_id``."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    job: str = Field(pattern=f"^{JOB_NAME}$")
    instant: AwareDatetime | None = None
    request_id: str | None = Field(default=None, pattern=f"^{REQUEST_ID}$")

    @model_validator(mode="after")
    def _one_of(self) -> OccurrenceId:
        if (self.instant is None) == (self.request_id is None):
            raise ValueError("an occurrence is a scheduled instant or a run-now request id, exactly one")
        if self.instant is not None:
            utc_text(self.instant)  # whole seconds
        return self

    @property
    def text(self) -> str:
        """The stable string: ``<job>@<instant UTC>`` or ``<job>@now:<request id>``."""
        if self.instant is not None:
            return occurrence_id(self.job, self.instant)
        return run_now_id(self.job, self.request_id or "")

    @property
    def turn_id(self) -> str:
        return turn_id_for(self.text)


def _job(job: str) -> str:
    if not _JOB_NAME.fullmatch(job):
        raise ValueError(f"{job!r} is not a job name (letters, digits, _ . -; letter or digit first; <= 64)")
    return job


def occurrence_id(job: str, instant: datetime) -> str:
    """The occurrence of ``job`` scheduled at ``instant``: ``backup@2027-10-31T00:30:00Z``."""
    return f"{_job(job)}@{utc_text(instant)}"


def run_now_id(job: str, request_id: str) -> str:
    """The run-now occurrence of ``job`` asked for by ``request_id``: a retried command is one run."""
    if not _REQUEST_ID.fullmatch(request_id):
        raise ValueError(f"{request_id!r} is not a request id (letters, digits, _ . : -; at most 64)")
    return f"{_job(job)}@{RUN_NOW}{request_id}"


def parse_occurrence_id(text: str) -> OccurrenceId:
    """The parts of an occurrence id; ``ValueError`` names what is wrong with it."""
    job, sep, rest = text.partition("@")
    if not sep:
        raise ValueError(f"{text!r} is not an occurrence id (<job>@<instant> or <job>@now:<request id>)")
    if rest.startswith(RUN_NOW):
        return OccurrenceId(job=_job(job), request_id=rest.removeprefix(RUN_NOW))
    return OccurrenceId(job=_job(job), instant=parse_utc_text(rest))


def _readable(text: str, limit: int) -> str:
    return _UNSAFE.sub("_", text)[:limit] or "_"


def _digest(*parts: str) -> str:
    return hashlib.sha256("\x00".join(parts).encode("utf-8", "surrogatepass")).hexdigest()[:_HASH_HEX]


def turn_id_for(occurrence: str) -> str:
    """The turn of one occurrence (``t-job-<job>-<instant or now-request>-<hash>``): the same on every
    restart and every resubmission, so lanes stores one turn per occurrence."""
    parsed = parse_occurrence_id(occurrence)
    if parsed.instant is not None:
        when = utc_text(parsed.instant).replace("-", "").replace(":", "")
    else:
        when = f"now-{_readable(parsed.request_id or '', 32)}"
    h = _digest("turn", "schedule", occurrence)
    return f"t-job-{_readable(parsed.job, 48)}-{when}-{h}"
