"""Incremental checkpoint saves (new messages from ``base_count`` + state record) and the one restore path."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from geode.conversation import Message
from geode.loop.state import CognitiveState, GuardCounters, TurnState
from geode.records.client import RecordClient
from geode.records.models import CheckpointSave, PendingBatch, Restored, SessionStatus

log = logging.getLogger(__name__)


class CheckpointUnavailable(Exception):
    """A strict save failed; nothing that depends on it may run."""


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

    def restore(self) -> Restored | None:
        """Load the session's checkpoint and remember where the store stands."""
        restored = self.records.load_checkpoint(self.session_id)
        if restored is not None:
            self.seq = restored.state.seq
            self.stored_count = restored.state.message_count
            self.status = restored.state.status
        return restored

    def save(
        self,
        state: TurnState,
        *,
        pending: PendingBatch | None = None,
        status: SessionStatus = SessionStatus.ACTIVE,
        meta: dict[str, Any] | None = None,
        strict: bool = True,
    ) -> int | None:
        """Save; returns the new seq. A strict failure raises :class:`CheckpointUnavailable`."""
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
        return self.seq


def messages_of(restored: Restored) -> list[Message]:
    return [Message.model_validate(m) for m in restored.messages]


def guards_of(restored: Restored) -> GuardCounters:
    return GuardCounters.model_validate(restored.state.guard_counters or {})


def cognitive_of(restored: Restored) -> CognitiveState:
    return CognitiveState.model_validate(restored.state.cognitive_state or {})
