"""Several timeline rows in one store request (``store.timeline.append_many``, a tool call's rows sent
together): each row goes to the group writer as its own operation, so a refused row is rolled back alone
and the others commit (usually in one transaction); the reply waits for every row's sync commit."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from geode.protocol import store as m
from geode.protocol.later import Later
from geode.records.models import TimelineEvent
from geode.records.timeline import TimelineStore


def append_many(timeline: TimelineStore, events: Sequence[TimelineEvent]) -> Later:
    """A Later of the ``AppendManyReply``: each row's seq in order, -1 and one line in ``errors`` for a row
    the writer refused. A row that cannot even be queued fails the whole request (appends are idempotent
    by event id: the sender's retry finds the rows already written)."""
    laters = [timeline.append_later(ev) for ev in events]
    out = Later()
    seqs = [-1] * len(events)
    errors: list[str] = []
    mu = threading.Lock()
    left = [len(events)]

    def settle(i: int) -> Any:
        def done(ok: bool, value: Any) -> None:
            with mu:
                if ok:
                    seqs[i] = int(value)
                else:
                    errors.append(f"{events[i].event_id[:128]}: {type(value).__name__}: {value}"[:300])
                left[0] -= 1
                last = left[0] == 0
            if last:
                out.resolve(m.AppendManyReply(seqs=seqs, errors=errors))

        return done

    for i, later in enumerate(laters):
        later.then(settle(i))
    return out
