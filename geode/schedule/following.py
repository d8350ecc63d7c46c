"""What the scheduler driver (:mod:`geode.schedule.driver`) follows: an occurrence on its way to its outcome,
the receipt operation id of its reply, and a reason as the ledger keeps it."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from geode.records.schedule_models import OccurrenceRow
from geode.schedule.occurrences import OccurrenceId
from geode.schedule.ports import TurnEnd


def one_line(text: str) -> str:
    """A reason as the ledger keeps it: one line, at most 500 characters."""
    return " ".join(text.split())[:500] or "unknown"


def reply_operation_id(turn_id: str) -> str:
    """The receipt operation id of an occurrence's reply: derived from its turn id (itself derived from the
    occurrence id), so a reply is posted at most once whatever is retried."""
    return f"reply-{turn_id}"


@dataclass
class Following:
    """An occurrence this driver follows to its outcome."""

    occ: OccurrenceId
    row: OccurrenceRow
    submitted: bool = False
    end: TurnEnd | None = None
    attempts: int = 0  # deferred deliveries
    retry_at: datetime | None = None
    renewed_at: datetime | None = None
    ending: bool = False  # its outcome waits for the end of the tick (recorded with the others)
