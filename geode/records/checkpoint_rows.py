"""A checkpoint save that carries timeline rows (``CheckpointSave.timeline``): the save and its rows are one
write operation of the group writer, so the rows are durable exactly when the save is and a turn's open or
end costs the loop one store round trip instead of two (issue 34).

Each row goes through the timeline's own path (redacted and bounded before the write, idempotent by event
id). The rows are observation: a row refused because its event id is stored with other content is left out
(the save still commits); a save that is refused writes none of its rows.
"""

from __future__ import annotations

import logging
from typing import Any

from geode.protocol.errors import Conflict
from geode.protocol.later import Later
from geode.records.checkpoints import CheckpointStore
from geode.records.lmdb_env import Txn
from geode.records.models import CheckpointSave, SaveResult
from geode.records.timeline import TimelineStore, bounded_payload
from geode.records.writer import WriteFn

log = logging.getLogger(__name__)


def save_with_rows_later(
    checkpoints: CheckpointStore, timeline: TimelineStore, save: CheckpointSave, *, wire: bool = False
) -> Later:
    """A ``Later`` of the save's :class:`SaveResult`, completed after the sync commit of the save and rows
    (``wire``: the save was decoded from a frame, see ``geode.records.save_digest.packed_save``)."""
    if not save.timeline:
        return checkpoints.save_later(save, wire=wire)
    return checkpoints.writer.submit(_write(checkpoints, timeline, save, wire))


def save_with_rows(checkpoints: CheckpointStore, timeline: TimelineStore, save: CheckpointSave) -> SaveResult:
    """The same, waited for (the in-process engine's ``save_checkpoint``)."""
    if not save.timeline:
        return checkpoints.save(save)
    result: SaveResult = checkpoints.writer.run(_write(checkpoints, timeline, save))
    return result


def _write(
    checkpoints: CheckpointStore, timeline: TimelineStore, save: CheckpointSave, wire: bool = False
) -> WriteFn:
    rows = list(save.timeline)
    bare = save.model_copy(update={"timeline": []})  # the save's fingerprint is of the save, not its rows
    texts = [bounded_payload(ev.payload, timeline.max_payload) for ev in rows]  # redacted off the writer

    def write(txn: Txn) -> SaveResult | dict[str, Any]:
        # raises (nothing written) when the save is refused; a frame's save: the reply's body map
        result = checkpoints._save_body(txn, bare) if wire else checkpoints._save(txn, bare)
        last: dict[str, int] = {}  # each session's last seq looked up once
        for ev, text in zip(rows, texts, strict=True):
            try:
                timeline._append(txn, ev, text, last)
            except Conflict as exc:  # raised before the row's puts: the save and the other rows stand
                log.warning("timeline row %s of %s not written: %s", ev.event_id[:128], ev.session_id, exc)
        return result

    return write
