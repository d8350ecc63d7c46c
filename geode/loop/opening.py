"""Phase 1, prepare input: the one restore path, incomplete-round repair, UserPromptSubmit, turn open."""

from __future__ import annotations

from typing import Any, cast

from geode.conversation import Message, TextBlock
from geode.loop.checkpoint import Checkpointer, StaleKept, cognitive_of, guards_of
from geode.loop.events import RESUME_SEQ_GAP, EventStream
from geode.loop.finish import timeline_row
from geode.loop.ports import LoopHooks, ToolRunner
from geode.loop.resume import repair
from geode.loop.session_hooks import CONTEXT_KEY, session_start
from geode.loop.settings import LoopSettings
from geode.loop.skills_in_use import skills_in_use
from geode.loop.state import CognitiveState, GuardCounters, Terminal, TurnState
from geode.protocol.turns import TerminationReason, TurnEventKind, TurnResult
from geode.records.client import RecordClient

KEPT_META = ("mode", "workspace", "origin", "title", "creator", "scope")  # creator, scope: set by turn 1


def open_turn(
    state: TurnState,
    ckpt: Checkpointer,
    events: EventStream,
    s: LoopSettings,
    *,
    records: RecordClient,
    executor: ToolRunner,
    hooks: LoopHooks,
) -> TurnResult | None:
    """Restore, repair, UserPromptSubmit, open the turn. Returns a result when the turn already finished.

    A new turn of a session this process saved last opens from its own copy (no store read); when the open
    save finds the session changed since, it opens again from the store, the hooks' first answers reused."""
    if not ckpt.trust_kept:
        return _open(state, ckpt, events, s, records=records, executor=executor, hooks=hooks, kept=False)
    once = cast(LoopHooks, OnceHooks(hooks))
    text, images = state.user_text, state.user_images
    try:
        return _open(state, ckpt, events, s, records=records, executor=executor, hooks=once, kept=True)
    except StaleKept:
        state.user_text, state.user_images, state.meta, state.history = text, images, {}, []
        state.guards, state.cognitive, state.unresolved = GuardCounters(), CognitiveState(), []
        events.seq = 0
        return _open(state, ckpt, events, s, records=records, executor=executor, hooks=once, kept=False)


class OnceHooks:
    """The loop's hooks, SessionStart and UserPromptSubmit answered once per turn (a turn opened again
    gets their first answer: a hook's command is never run twice for one prompt)."""

    ONCE = ("session_start", "user_prompt_submit")

    def __init__(self, inner: LoopHooks) -> None:
        self._inner = inner
        self._answers: dict[str, Any] = {}

    def __getattr__(self, name: str) -> Any:
        fn = getattr(self._inner, name)
        if name not in self.ONCE:
            return fn

        def once(*args: Any, **kw: Any) -> Any:
            if name not in self._answers:
                self._answers[name] = fn(*args, **kw)
            return self._answers[name]

        return once


def _open(
    state: TurnState,
    ckpt: Checkpointer,
    events: EventStream,
    s: LoopSettings,
    *,
    records: RecordClient,
    executor: ToolRunner,
    hooks: LoopHooks,
    kept: bool,
) -> TurnResult | None:
    try:
        restored = (ckpt.restore_kept(state.turn_id) if kept else None) or ckpt.restore()
    except Exception as exc:
        raise Terminal(
            TerminationReason.CHECKPOINT_UNAVAILABLE, error=f"restore failed: {exc}"[:500]
        ) from exc
    same_turn = False
    if restored is not None:
        meta = restored.state.meta
        if meta.get("done_turn") == state.turn_id and isinstance(meta.get("last_result"), dict):
            return TurnResult.model_validate(meta["last_result"])  # already finished: idempotent re-run
        state.history = ckpt.history(restored)
        state.cognitive = cognitive_of(restored)
        state.meta = {k: meta[k] for k in KEPT_META if k in meta}
        if CONTEXT_KEY in meta:  # SessionStart's additionalContext, for every turn of the session
            state.meta[CONTEXT_KEY] = meta[CONTEXT_KEY]
        same_turn = meta.get("turn_id") == state.turn_id
        events.seq = int(meta.get("event_seq", 0)) + (RESUME_SEQ_GAP if same_turn else 0)
        if same_turn:
            state.guards = guards_of(restored)
            state.user_text = str(meta.get("user_input", state.user_text))
        base_ctx = {
            "session_id": state.session_id,
            "turn_id": state.turn_id,
            "mode": s.mode,
            "origin": s.origin,
            "workspace": s.workspace,
            "granted_tools": s.granted_tools,
            "scope": s.scope,
            "skills": skills_in_use(state.history),  # a re-sent call keeps the skills in use (not the new)
        }
        repair(
            state,
            pending=restored.state.pending_batch,
            records=records,
            executor=executor,
            checkpoint=ckpt,
            events=events,
            settings=s,
            base_ctx=base_ctx,
        )
    state.meta.update(turn_id=state.turn_id, mode=s.mode, origin=s.origin, workspace=s.workspace)
    if restored is None and s.creator:  # a new MCP session: who may continue it (continue_agent)
        state.meta["creator"] = s.creator
    if restored is None and s.scope:  # whose session: the store child reads it (search), set once
        state.meta["scope"] = s.scope
    if same_turn:
        state.meta["user_input"] = state.user_text[:4000]
        return None
    source = "startup" if restored is None else "resume" if s.session_source == "resume" else ""
    if source:  # Claude Code's SessionStart: a new session, or the first turn after a client resumed it
        session_start(state, s, hooks, source)
    hook = hooks.user_prompt_submit(
        {"prompt": state.user_text}, {"session_id": state.session_id, "turn_id": state.turn_id}
    )
    if hook.action == "block":
        raise Terminal(TerminationReason.INPUT_BLOCKED, error=hook.reason or "blocked by UserPromptSubmit")
    if hook.action == "rewrite":
        state.user_text = str(hook.updates.get("prompt", state.user_text))
    state.guards = GuardCounters(turn_id=state.turn_id)
    state.cognitive.goal = state.user_text[:500]
    state.meta["user_input"] = state.user_text[:4000]
    state.history.append(
        Message(
            role="user",
            content=(TextBlock(text=state.user_text), *state.user_images),
            metadata={"origin": "user_input", "turn_id": state.turn_id},
        )
    )
    started = timeline_row(state, "turn.started", {"input_chars": len(state.user_text)})
    seq = ckpt.save(state, rows=[started])  # the row in the save's own store write: durable with the open
    events.emit(TurnEventKind.CHECKPOINT_SAVED, seq=seq, phase="turn_open")
    return None
