"""The lanes' spans of a turn: its admission (the trace's root when its entry path started none) and each
push to a worker (backdated to when the turn was queued, so its length is the queue wait).

The admission span's traceparent is kept in the turn record (``TurnRecord.trace``): every later push of the
turn, a resume after a lost worker or a lanes restart included, is in the same trace."""

from __future__ import annotations

import time

from geode.lanes.queue import Grant
from geode.records.models import TurnRecord
from geode.telemetry import spans


def admitted(rec: TurnRecord, parent: str | None) -> str | None:
    """Record the turn's admission under its entry path's span; the traceparent the record keeps."""
    sp = spans.span(
        "lanes.admit",
        {"geode.turn_id": rec.turn_id, "geode.mode": rec.mode, "geode.origin": rec.origin or None},
        parent=parent,
        root=True,
    )
    sp.end()
    return sp.traceparent


def pushing(rec: TurnRecord, g: Grant, worker: str, resume: bool) -> spans.Span:
    """The span of one push of the turn to ``worker`` (its context is what the push envelope carries)."""
    if rec.trace is None:
        return spans.NOOP
    attrs = {
        "geode.turn_id": rec.turn_id,
        "geode.worker": worker,
        "geode.attempt": rec.attempts,
        "geode.resume": resume,
        "geode.queue_wait_s": round(g.waited_s, 4),
    }
    start_ns = time.time_ns() - int(g.waited_s * 1e9)
    return spans.span("lanes.dispatch", attrs, parent=rec.trace, start_ns=start_ns)
