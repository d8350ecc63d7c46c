"""Several timeline rows in one store request (``store.timeline.append_many``, a tool call's rows sent
together): the rows are ONE operation of the group writer (one queued op, one completion, one reply made in
the write), each row in a nested transaction of its own inside it, so a refused row is rolled back alone and
the others commit; the reply comes after the rows' sync commit (issue 34: was one writer op, one ``Later``
and one completion callback per row, and a reply model dumped per request)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import lmdb

from geode.protocol.errors import GeodeError
from geode.protocol.later import Later
from geode.records.lmdb_env import Txn
from geode.records.models import TimelineEvent
from geode.records.timeline import TimelineStore, bounded_payload

log = logging.getLogger(__name__)


def append_many(timeline: TimelineStore, events: Sequence[TimelineEvent]) -> Later:
    """A Later of the ``AppendManyReply`` body: each row's seq in order, -1 and one line in ``errors`` for a
    row the writer refused. A request that cannot even be queued fails as a whole (appends are idempotent
    by event id: the sender's retry finds the rows already written)."""
    rows = list(events)
    texts = [bounded_payload(ev.payload, timeline.max_payload) for ev in rows]  # redacted off the writer
    return timeline.writer.submit(lambda txn: _write_rows(timeline, txn, rows, texts))


def _write_rows(
    timeline: TimelineStore, txn: Txn, rows: list[TimelineEvent], texts: list[str]
) -> dict[str, Any]:
    """The rows in order, each in a child transaction of ``txn``; the reply body as
    ``AppendManyReply(...).model_dump()`` gives it. A full map is not a row's refusal: it fails the whole
    operation, so the writer grows the map and runs the batch again."""
    env = timeline.renv.env
    assert env is not None  # the writer holds the write scope of an open store
    seqs: list[int] = []
    errors: list[str] = []
    last: dict[str, int] = {}  # a session's last seq, kept by the rows (a refused row wrote none)
    for ev, text in zip(rows, texts, strict=True):
        child = env.begin(write=True, parent=txn)
        try:
            seq = timeline._append(child, ev, text, last)
        except lmdb.MapFullError:
            child.abort()
            raise
        except Exception as exc:
            child.abort()
            seqs.append(-1)
            errors.append(f"{ev.event_id[:128]}: {_refusal(exc)}"[:300])
            continue
        child.commit()
        seqs.append(seq)
    return {"seqs": seqs, "errors": errors}


def _refusal(exc: Exception) -> str:
    """``<type>: <message>`` of a refused row, as the writer names a refused operation's error."""
    if isinstance(exc, GeodeError):
        return f"{type(exc).__name__}: {exc}"
    if isinstance(exc, lmdb.Error):  # e.g. a bad key or value size
        return f"Unavailable: record store rejected the write: {type(exc).__name__}: {exc}"
    log.error("timeline row refused by an unexpected error", exc_info=exc)
    return f"GeodeError: {type(exc).__name__}: {exc}"
