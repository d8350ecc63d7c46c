"""The scheduler's clock: the real one, or, for the tree tests only, a fake one read from a file.

``GEODE_FAKE_CLOCK=<file>`` (a test knob, not a setting: docs/testing.md) makes the ``scheduler`` child's
clock the instant written in that file (ISO-8601 with an offset, e.g. ``2026-03-29T01:00:05+00:00``), read
again at every look, so a test moves time by rewriting the file (atomically: write aside, then rename): a
host asleep for hours, a DST night or a wall clock jumping backwards take seconds. The clock stands still
between rewrites. A relative path is read under the home. Unset (production), it costs one environment
lookup at start and the real clock is used; set, the scheduler logs a warning at start and names the file in
its status, so it is never in use unseen. Only the scheduler's clock is replaced: the store keeps the real
one for leases and the times it stamps on ledger rows.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from geode.protocol.errors import Unavailable

ENV = "GEODE_FAKE_CLOCK"
log = logging.getLogger(__name__)


def real_now() -> datetime:
    return datetime.now(UTC)


class FileClock:
    """The instant in ``path``, read at each call; the last good one when a read fails (none yet: an
    :class:`Unavailable` naming the file, which the scheduler's loop reports and retries)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.last: datetime | None = None

    def __call__(self) -> datetime:
        try:
            text = self.path.read_text(encoding="utf-8").strip()
            at = datetime.fromisoformat(text)
            if at.tzinfo is None:
                raise ValueError(f"{text!r} has no UTC offset")
            self.last = at.astimezone(UTC)
        except (OSError, ValueError) as exc:
            if self.last is None:
                raise Unavailable(f"{ENV}: cannot read the fake clock {self.path}: {exc}") from exc
            log.warning("%s: %s unreadable (%s); the clock stays at %s", ENV, self.path, exc, self.last)
        return self.last


def write_clock(path: Path, at: datetime) -> None:
    """Set a fake clock file to ``at`` (atomically: a reader sees the old instant or the new one)."""
    if at.tzinfo is None:
        raise ValueError("a fake clock instant needs a UTC offset")
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(at.astimezone(UTC).isoformat(), encoding="utf-8")
    os.replace(tmp, path)


def scheduler_clock(home_root: Path) -> tuple[Callable[[], datetime], Path | None]:
    """The clock the scheduler runs on and the fake clock's file (None: the real clock)."""
    value = os.environ.get(ENV, "").strip()
    if not value:
        return real_now, None
    path = Path(value).expanduser()
    path = path if path.is_absolute() else home_root / path
    log.warning(
        "%s is set: the scheduler runs on the FAKE clock in %s (tests only), not the real one", ENV, path
    )
    return FileClock(path), path
