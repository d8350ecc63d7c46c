"""Incremental checkpoint saves (new messages from ``base_count`` + state record) and the one restore path.

The restore path reads every message of the session from the store, except when this process saved the
very checkpoint the store still holds (same session creation time, seq and message count): then the
messages this process kept from its last save are the session's history, and only the state record is read
(``load_checkpoint(from_index=count)``). A turn then costs the same whatever the session's length, and its
messages are the same objects as the last turn's (their sizes and wire JSON already computed, see
:mod:`geode.providers.identity_memo`). Any other writer in between (the other worker, the operator)
bumps the seq: the whole history is read.

A new turn (not a resume) of a session this process saved last, without a pending batch, is opened from
this process's copy of the state record with no store read at all (:meth:`Checkpointer.restore_kept`): the
turn's open save is then the fence. The store refuses it if anyone saved the session since (its seq is not
above the stored one) or the session was recreated (``session_created_at``), and the turn opens again from a
store read (:class:`StaleKept`, geode/loop/opening.py), its hooks not run twice.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from pydantic import BaseModel

from geode.conversation import Message
from geode.loop.state import CognitiveState, GuardCounters, TurnState
from geode.protocol.errors import ErrorCode
from geode.records.client import RecordClient
from geode.records.models import (
    CheckpointSave,
    CheckpointState,
    PendingBatch,
    Restored,
    SessionStatus,
    TimelineEvent,
)
from geode.tools.plan import BoundToolPlan
from geode.tools.receipts import needs_receipt

log = logging.getLogger(__name__)


class CheckpointUnavailable(Exception):
    """A strict save failed; nothing that depends on it may run."""


class StaleKept(Exception):
    """The first save after a restore from this process's own copy was refused: the store moved on since
    (another writer, or the session was recreated). The turn opens again from a store read."""


TURN_KEYS = ("turn_id", "done_turn")  # the meta naming the last turn opened and finished
# what a process keeps of the sessions it saved (least recently saved dropped first): a worker serves many
# more sessions than it runs at once (lanes sends a session back to its last worker), and a session not kept
# reads its whole history from the store on its next turn (each message validated, measured and encoded
# again): at 10 sessions a process and 8 kept, 14.5 ms CPU a turn instead of 4.8 (130-message histories)
KEPT_SESSIONS = 32
KEPT_MESSAGES = 10_000  # and at most this many messages in all (the most recent session is always kept)


@dataclass(frozen=True)
class Kept:
    """What the store holds of a session after this process's last save of it: its messages, and when that
    save had no pending batch the whole state record as the store wrote it (``fields``: its fields; the
    model is made by :meth:`record` only when a turn opens from it, not at every save).

    ``source``: the messages, or (``count`` set) a list only ever appended to whose first ``count`` they are
    (the saving :class:`Checkpointer`'s copy of what it sent, grown by each save's new messages): a save
    costs its new messages, not a tuple of the whole history (two or three saves a round; the tuple is made
    when a turn opens from it)."""

    created_at: float
    seq: int
    source: Sequence[Message]
    fields: dict[str, Any] | None = None
    count: int | None = None

    @property
    def size(self) -> int:
        return len(self.source) if self.count is None else self.count

    @cached_property
    def messages(self) -> tuple[Message, ...]:
        return tuple(self.source if self.count is None else self.source[: self.count])

    def record(self) -> CheckpointState | None:
        return None if self.fields is None else CheckpointState.model_construct(**self.fields)


_kept: OrderedDict[str, Kept] = OrderedDict()
_kept_lock = threading.Lock()
_kept_messages = [0]  # the messages _kept holds in all


def _keep(session_id: str, kept: Kept | None) -> None:
    with _kept_lock:
        old = _kept.pop(session_id, None)
        if old is not None:
            _kept_messages[0] -= old.size
        if kept is not None:
            _kept[session_id] = kept
            _kept_messages[0] += kept.size
        while len(_kept) > 1 and (len(_kept) > KEPT_SESSIONS or _kept_messages[0] > KEPT_MESSAGES):
            _kept_messages[0] -= _kept.popitem(last=False)[1].size


def _kept_history(session_id: str) -> Kept | None:
    with _kept_lock:
        return _kept.get(session_id)


class Checkpointer:
    """Knows how many messages the store holds and the last seq, so every save sends only what is new.

    ``trust_kept`` (a new turn, not a resume): :meth:`restore_kept` may open the turn from this process's
    copy of its own last save without a store read; the next save is the fence (its seq is refused if
    anyone saved since, its ``session_created_at`` if the session was recreated) and raises
    :class:`StaleKept` then."""

    def __init__(
        self,
        records: RecordClient,
        session_id: str,
        *,
        meta_hook: Callable[[], dict[str, Any]] | None = None,
        trust_kept: bool = False,
    ) -> None:
        self.records = records
        self.meta_hook = meta_hook
        self.session_id = session_id
        self.trust_kept = trust_kept
        self.seq = 0
        self.stored_count = 0
        self.status = SessionStatus.ACTIVE
        self.created_at: float | None = None  # the session's, once restored (None: a new session)
        self._prefix: tuple[Message, ...] = ()  # the kept messages the last restore did not read
        self._meta: dict[str, Any] | None = None  # the stored meta (the store merges each save's into it)
        self._unfenced = False  # restored from the kept copy: the next save is the fence
        self._receipts_open: bool | None = None  # the last save's answer (None: no save, failed, not told)
        self._sent_after: tuple[str, ...] = ()  # the tools its pending batch sends after it
        self._saved: list[Message] = []  # the messages the store holds after this process's saves (Kept)

    def restore_kept(self, turn_id: str) -> Restored | None:
        """The session as this process last saved it, without a store read, when that is allowed and known
        (its last save here had no pending batch, and was not of ``turn_id``: a turn pushed again is
        answered from the store); None otherwise (then :meth:`restore`)."""
        kept = _kept_history(self.session_id) if self.trust_kept else None
        record = kept.record() if kept is not None else None
        if kept is None or record is None or turn_id in (record.meta.get(k) for k in TURN_KEYS):
            return None
        self._restored(record, kept.messages)
        self._unfenced = True
        return Restored.model_construct(state=record, messages=[])

    def restore(self) -> Restored | None:
        """Load the session's checkpoint and remember where the store stands; :meth:`history` gives its
        messages. Reads only the state record when the store holds the checkpoint this process last saved."""
        self._prefix, self._unfenced, self._meta, self._saved = (), False, None, []
        self.seq, self.stored_count, self.status, self.created_at = 0, 0, SessionStatus.ACTIVE, None
        restored = None
        kept = _kept_history(self.session_id)
        if kept is not None:
            restored = self.records.load_checkpoint(self.session_id, from_index=kept.size)
            if restored is not None and (kept.created_at, kept.seq, kept.size) == (
                restored.state.created_at,
                restored.state.seq,
                restored.state.message_count,
            ):
                self._prefix = kept.messages  # the store holds the checkpoint this process saved last
            else:
                restored = None
        if not self._prefix:
            restored = self.records.load_checkpoint(self.session_id)
        if restored is not None:
            self._restored(restored.state, self._prefix)
        return restored

    def _restored(self, record: CheckpointState, prefix: tuple[Message, ...]) -> None:
        self._prefix, self._saved = prefix, []
        self.seq = record.seq
        self.stored_count = record.message_count
        self.status = record.status
        self.created_at = record.created_at
        self._meta = dict(record.meta)

    def history(self, restored: Restored) -> list[Message]:
        """The restored session's messages, in order (the kept ones are the same objects as last time)."""
        return [*self._prefix, *messages_of(restored)]

    def save(
        self,
        state: TurnState,
        *,
        pending: PendingBatch | None = None,
        status: SessionStatus = SessionStatus.ACTIVE,
        meta: dict[str, Any] | None = None,
        strict: bool = True,
        rows: Sequence[TimelineEvent] = (),
    ) -> int | None:
        """Save; returns the new seq. A strict failure raises :class:`CheckpointUnavailable`. ``rows``:
        timeline rows written in the save's own store write (none of them when the save fails)."""
        new = state.history[self.stored_count :]
        save = CheckpointSave(
            session_id=self.session_id,
            seq=self.seq + 1,
            base_count=self.stored_count,
            new_messages=[_json(m) for m in new],
            status=status,
            reopen=self.status in (SessionStatus.COMPLETED, SessionStatus.ERROR),
            cognitive_state=_json(state.cognitive),
            guard_counters={**_json(state.guards), "elapsed_s": state.elapsed()},
            pending_batch=pending,
            meta={**state.meta, **(meta or {}), **(self.meta_hook() if self.meta_hook else {})},
            session_created_at=self.created_at,
            timeline=list(rows),
        )
        unfenced, self._unfenced = self._unfenced, False
        try:
            done = self.records.save_checkpoint(save)
        except Exception as exc:
            _keep(self.session_id, None)  # what the store holds is not known: the next turn reads it
            self._receipts_open = None
            if unfenced and getattr(exc, "code", None) == ErrorCode.CONFLICT:
                log.info("session %s changed since this process saved it: read again", self.session_id)
                raise StaleKept(str(exc)) from exc
            log.warning("checkpoint save seq=%s for %s failed: %s", save.seq, self.session_id, exc)
            if strict:
                raise CheckpointUnavailable(str(exc)) from exc
            return None
        self.seq = save.seq
        self.stored_count += len(new)
        self._receipts_open = getattr(done, "receipts_open", None)
        self._sent_after = tuple(op.name for op in pending.operations) if pending is not None else ()
        self.status = status
        if self.created_at is not None:  # what the store now holds, for this session's next restore
            self._kept_after(save, state.history, new, getattr(done, "noop", False))
        return self.seq

    def receipts_clear(self, plan: BoundToolPlan | None) -> bool:
        """True when the session cannot hold an uncertain receipt now, so Verify need not list them.

        The last save's store write found no admitted or uncertain receipt of the session. A receipt turns
        uncertain only from admitted (a dead owner, a crashed handler, a settled unknown outcome), and only
        this session's turn admits its receipts (a ToolContext is made only for a call of its saved pending
        batch; lanes runs one turn of a session at a time; replies and delegated sessions have their own
        session ids): so it holds none now unless a call sent since that save admitted one. Those are the
        save's pending batch: each must be read-only in the bound plan (the executor admits no receipt for
        a read; a name the plan lacks counts as an effect). An operator's reconcile only clears receipts."""
        if self._receipts_open is not False:
            return False
        for name in self._sent_after:
            spec = plan.get(name) if plan is not None else None
            if spec is None or needs_receipt(spec):
                return False
        return True

    def _kept_after(
        self, save: CheckpointSave, history: Sequence[Message], new: Sequence[Message], noop: bool
    ) -> None:
        """Remember the store's copy after ``save``: the messages, and the state record as the store built it
        (its meta merged into the stored one) when the save had no pending batch and was not a repeat. The
        messages: this checkpointer's copy grown by the save's ``new`` ones when it held the ones before
        them (the history's head does not change under a turn: the store has them), else copied anew."""
        assert self.created_at is not None
        if len(self._saved) == self.stored_count - len(new):
            self._saved += new
        else:  # the first save of this checkpointer (or one after a save it did not keep)
            self._saved = list(history[: self.stored_count])
        fields = None
        if self._meta is not None and not noop:
            self._meta = {**self._meta, **save.meta}
            if save.pending_batch is None:
                fields = {
                    "session_id": self.session_id,
                    "seq": save.seq,
                    "message_count": self.stored_count,
                    "status": save.status,
                    "cognitive_state": save.cognitive_state,
                    "guard_counters": save.guard_counters,
                    "pending_batch": None,
                    "model_settings": save.model_settings,
                    "meta": self._meta,
                    "created_at": self.created_at,
                    "updated_at": time.time(),
                }
        else:
            self._meta = None  # a repeat: the stored meta is not known exactly
        _keep(self.session_id, Kept(self.created_at, self.seq, self._saved, fields, self.stored_count))


def _json(model: BaseModel) -> dict[str, Any]:
    """``model.model_dump(mode="json")`` by the model's serializer itself (no ``model_dump`` wrapper)."""
    out: dict[str, Any] = model.__pydantic_serializer__.to_python(model, mode="json")
    return out


def messages_of(restored: Restored) -> list[Message]:
    return [Message.model_validate(m) for m in restored.messages]


def guards_of(restored: Restored) -> GuardCounters:
    return GuardCounters.model_validate(restored.state.guard_counters or {})


def cognitive_of(restored: Restored) -> CognitiveState:
    return CognitiveState.model_validate(restored.state.cognitive_state or {})
