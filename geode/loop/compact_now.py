"""A compaction turn: the chat's ``/compact`` (the CLI's and a bound chat's) compacts the session now.

Such a turn carries ``compact_now`` in its settings. It restores the session, appends no user message and
calls no model but the summarizer: the whole history after the last summary is summarized in one bounded call
(:meth:`geode.loop.compacting.Compactor.compact`, PreCompact ``trigger`` "manual") and stored as one
compaction record, so the next turn's view is the summary and what follows it. A failed, timed-out or
blocked summary stores nothing (the deterministic view stays the floor) and the turn says so in its text. It
is a turn like others for lanes (one at a time per session, idempotent by turn id: a re-run after a crash
finds the finished result, or the stored record by its compaction id)."""

from __future__ import annotations

from typing import Any

from geode.conversation import Message
from geode.loop.checkpoint import Checkpointer, cognitive_of
from geode.loop.compacting import Compactor
from geode.loop.events import RESUME_SEQ_GAP, EventStream
from geode.loop.opening import KEPT_META
from geode.loop.session_hooks import CONTEXT_KEY
from geode.loop.settings import LoopSettings
from geode.loop.state import Terminal, TurnState
from geode.loop.summarize import is_record, records_of
from geode.protocol.turns import TerminationReason, TurnResult
from geode.providers.types import Provider
from geode.records.client import RecordClient

NOTHING = "Nothing to compact: this session has no messages yet."
NOTHING_NEW = "Nothing to compact: no messages since the last summary."
OFF = (
    "Not compacted: summarizing compaction is off ([loop] compaction_summary = false); a long session is "
    "shortened by the deterministic view when it nears the window."
)


def compact_turn(
    state: TurnState,
    ckpt: Checkpointer,
    events: EventStream,
    s: LoopSettings,
    *,
    provider: Provider,
    model: str,
    hooks: Any,
    records: RecordClient,
) -> TurnResult | Terminal:
    """Summarize the session's history now; a :class:`Terminal` to finish the turn with (its text says what
    happened), or the stored result when this turn already finished."""
    try:
        restored = ckpt.restore()
    except Exception as exc:
        return Terminal(TerminationReason.CHECKPOINT_UNAVAILABLE, error=f"restore failed: {exc}"[:500])
    if restored is None:
        return Terminal(TerminationReason.NATURAL, text=NOTHING)
    meta = restored.state.meta
    if meta.get("done_turn") == state.turn_id and isinstance(meta.get("last_result"), dict):
        return TurnResult.model_validate(meta["last_result"])  # already finished: idempotent re-run
    state.history = ckpt.history(restored)
    state.cognitive = cognitive_of(restored)
    state.meta = {k: meta[k] for k in (*KEPT_META, CONTEXT_KEY) if k in meta}
    same_turn = meta.get("turn_id") == state.turn_id
    events.seq = int(meta.get("event_seq", 0)) + (RESUME_SEQ_GAP if same_turn else 0)
    state.meta.update(turn_id=state.turn_id, mode=s.mode, origin=s.origin, workspace=s.workspace)
    if not s.compaction_summary:
        return Terminal(TerminationReason.NATURAL, text=OFF)
    recs = records_of(state.history)
    if recs and recs[-1].metadata.get("turn_id") == state.turn_id:  # stored by this turn before a crash
        return _compacted(len(_covered(state.history, len(recs) - 1)))
    new = _covered(state.history, len(recs))
    if not new:
        return Terminal(TerminationReason.NATURAL, text=NOTHING_NEW)
    budget = max(1000, s.context_window_tokens - s.output_reserve_tokens)
    compactor = Compactor(state, ckpt, s, provider=provider, model=model, hooks=hooks, records=records)
    outcome = compactor.compact(len(state.history), budget, trigger="manual")
    if outcome in ("stored", "already stored"):
        return _compacted(len(new))
    return Terminal(
        TerminationReason.NATURAL,
        text=f"Not compacted ({outcome}); the session goes on with the deterministic view.",
    )


def _covered(history: list[Message], nth: int) -> list[Message]:
    """The messages the ``nth`` compaction record covers beyond the one before it (``nth`` = the number of
    records: those a new summary would cover, up to the end of the history)."""
    recs = records_of(history)
    start = int(recs[nth - 1].metadata.get("covers", 0)) if nth else 0
    end = int(recs[nth].metadata.get("covers", len(history))) if nth < len(recs) else len(history)
    return [m for m in history[start:end] if not is_record(m)]


def _compacted(n: int) -> Terminal:
    return Terminal(
        TerminationReason.NATURAL,
        text=f"Compacted: {n} messages summarized; the next turns start from the summary.",
    )
