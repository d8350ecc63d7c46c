"""Incremental checkpoint saves (new messages from ``base_count`` + state record) and the one restore path.

The restore path reads every message of the session from the store, except when this process saved the
very checkpoint the store still holds (same session creation time, seq and message count): then the
messages this process kept from its last save are the session's history, and only the state record is read
(``load_checkpoint(from_index=count)``). A turn then costs the same whatever the session's length, and its
messages are the same objects as the last turn's (their sizes and wire JSON already computed, see
:mod:`geode.providers.identity_memo`). Any other writer in between (the other worker, the operator)
bumps the seq: the whole history is read.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

from geode.conversation import Message
from geode.loop.state import CognitiveState, GuardCounters, TurnState
from geode.records.client import RecordClient
from geode.records.models import CheckpointSave, PendingBatch, Restored, SessionStatus, TimelineEvent

log = logging.getLogger(__name__)


class CheckpointUnavailable(Exception):
    """A strict save failed; nothing that depends on it may run."""


KEPT_SESSIONS = 8  # sessions whose last saved history a process keeps (least recently saved dropped first)
_kept: OrderedDict[str, tuple[float, int, tuple[Message, ...]]] = OrderedDict()  # (created_at, seq, messages)
_kept_lock = threading.Lock()


def _keep(session_id: str, created_at: float, seq: int, messages: tuple[Message, ...]) -> None:
    with _kept_lock:
        _kept.pop(session_id, None)
        _kept[session_id] = (created_at, seq, messages)
        while len(_kept) > KEPT_SESSIONS:
            _kept.popitem(last=False)


def _kept_history(session_id: str) -> tuple[float, int, tuple[Message, ...]] | None:
    with _kept_lock:
        return _kept.get(session_id)


class Checkpointer:
    """Knows how many messages the store holds and the last seq, so every save sends only what is new."""

    def __init__(
        self, records: RecordClient, session_id: str, *, meta_hook: Callable[[], dict[str, Any]] | None = None
    ) -> None:
        self.records = records
        self.meta_hook = meta_hook
        self.session_id = session_id
        self.seq = 0
        self.stored_count = 0
        self.status = SessionStatus.ACTIVE
        self.created_at: float | None = None  # the session's, once restored (None: a new session)
        self._prefix: tuple[Message, ...] = ()  # the kept messages the last restore did not read

    def restore(self) -> Restored | None:
        """Load the session's checkpoint and remember where the store stands; :meth:`history` gives its
        messages. Reads only the state record when the store holds the checkpoint this process last saved."""
        self._prefix = ()
        restored = None
        kept = _kept_history(self.session_id)
        if kept is not None:
            created_at, seq, messages = kept
            restored = self.records.load_checkpoint(self.session_id, from_index=len(messages))
            same = (created_at, seq, len(messages))
            if restored is not None and same == (
                restored.state.created_at,
                restored.state.seq,
                restored.state.message_count,
            ):
                self._prefix = messages  # the store holds the checkpoint this process saved last
            else:
                restored = None
        if not self._prefix:
            restored = self.records.load_checkpoint(self.session_id)
        if restored is not None:
            self.seq = restored.state.seq
            self.stored_count = restored.state.message_count
            self.status = restored.state.status
            self.created_at = restored.state.created_at
        return restored

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
            new_messages=[m.model_dump(mode="json") for m in new],
            status=status,
            reopen=self.status in (SessionStatus.COMPLETED, SessionStatus.ERROR),
            cognitive_state=state.cognitive.model_dump(mode="json"),
            guard_counters={**state.guards.model_dump(mode="json"), "elapsed_s": state.elapsed()},
            pending_batch=pending,
            meta={**state.meta, **(meta or {}), **(self.meta_hook() if self.meta_hook else {})},
            timeline=list(rows),
        )
        try:
            self.records.save_checkpoint(save)
        except Exception as exc:
            log.warning("checkpoint save seq=%s for %s failed: %s", save.seq, self.session_id, exc)
            if strict:
                raise CheckpointUnavailable(str(exc)) from exc
            return None
        self.seq = save.seq
        self.stored_count += len(new)
        self.status = status
        if self.created_at is not None:  # what the store now holds, for this session's next restore
            _keep(self.session_id, self.created_at, self.seq, tuple(state.history[: self.stored_count]))
        return self.seq


def messages_of(restored: Restored) -> list[Message]:
    return [Message.model_validate(m) for m in restored.messages]


def guards_of(restored: Restored) -> GuardCounters:
    return GuardCounters.model_validate(restored.state.guard_counters or {})


def cognitive_of(restored: Restored) -> CognitiveState:
    return CognitiveState.model_validate(restored.state.cognitive_state or {})
