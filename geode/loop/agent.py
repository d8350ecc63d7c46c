"""AgenticLoop: one user turn in six phases (prepare input, prepare call, call provider, process tools,
observe and compact, finish), with checkpointed batches, resume repair and Verify."""

from __future__ import annotations

import logging
import threading

from geode.conversation import ImageBlock, Message, TextBlock
from geode.loop.batch import drop_settled, process_batch
from geode.loop.call import ContextOverflow, call_model
from geode.loop.checkpoint import Checkpointer, CheckpointUnavailable
from geode.loop.compact_now import compact_turn
from geode.loop.compacting import Compactor
from geode.loop.compaction import ContextExhausted
from geode.loop.events import EventStream, bind_current, unbind_current
from geode.loop.finish import finish_turn, save_with_rows, timeline_row
from geode.loop.guards import check_cost, check_round_entry, observe_batch
from geode.loop.judge import make_judge
from geode.loop.opening import open_turn
from geode.loop.ports import EventSink, LoopHooks, NoHooks, ToolRunner
from geode.loop.prepare import bind_plan, prepare_call
from geode.loop.session_hooks import notify_idle
from geode.loop.settings import LoopSettings
from geode.loop.state import CancelFlag, Terminal, TurnState
from geode.loop.verify import verify
from geode.prompt.sources import PromptSources
from geode.protocol.turns import (
    TerminationReason,
    TurnEventKind,
    TurnResult,
)
from geode.providers.types import Provider, StopReason
from geode.records.client import RecordClient
from geode.records.models import TimelineEvent
from geode.tools.plan import BoundToolPlan

log = logging.getLogger(__name__)

CONTEXT_NOTICE = (
    "Context window exhausted: the conversation no longer fits, even compacted. Start a new session."
)
KEPT_META = ("mode", "workspace", "origin", "title")


class AgenticLoop:
    """Runs turns of sessions. Collaborators are passed in; nothing here knows about transports.

    ``provider``: a :class:`geode.providers.types.Provider`; ``executor``: bind_plan / execute(ctx, call);
    ``records``: a :class:`RecordClient`; ``events``: an :class:`EventSink` (or None); ``hooks``: LoopHooks
    (wrap a shared HookRunner with :class:`geode.loop.hook_bridge.RunnerHooks`); ``plan``: the session's
    BoundToolPlan (filtered by the turn's settings and projected onto the provider on each turn).
    """

    def __init__(
        self,
        provider: Provider,
        executor: ToolRunner,
        records: RecordClient,
        *,
        plan: BoundToolPlan | None = None,
        events: EventSink | None = None,
        hooks: LoopHooks | None = None,
        settings: LoopSettings | None = None,
        prompt: PromptSources | None = None,
        judge_provider: Provider | None = None,
    ) -> None:
        self.provider = provider
        self.executor = executor
        self.records = records
        self.plan = plan
        self.sink = events
        self.hooks: LoopHooks = hooks or NoHooks()
        self.settings = settings or LoopSettings()
        self.prompt = prompt or PromptSources()
        self.judge_provider = judge_provider

    # --- entry points ---------------------------------------------------------------------------------
    def run_turn(
        self,
        session_id: str,
        turn_id: str,
        text: str,
        *,
        resume: bool = False,
        cancel: threading.Event | None = None,
        settings: LoopSettings | None = None,
        images: tuple[ImageBlock, ...] = (),
    ) -> TurnResult:
        s = settings or self.settings
        state = TurnState(
            session_id=session_id,
            turn_id=turn_id,
            user_text=text,
            user_images=images,
            cancel=cancel or CancelFlag(),
        )
        events = EventStream(self.sink, session_id, turn_id)
        ckpt = Checkpointer(  # a new turn may open from this process's copy of its last save (fenced)
            self.records, session_id, meta_hook=lambda: {"event_seq": events.seq}, trust_kept=not resume
        )
        model = s.model or getattr(self.provider, "model", "") or "default"
        token = bind_current(events, state.cancel)
        try:
            return self._run(state, ckpt, events, s, model)
        finally:
            unbind_current(token)

    def _run(
        self, state: TurnState, ckpt: Checkpointer, events: EventStream, s: LoopSettings, model: str
    ) -> TurnResult:
        rows: list[TimelineEvent] = []  # the verification's decision, written with turn.ended
        try:
            if s.compact_now:  # the chat's /compact: only a summary of the session (geode.loop.compact_now)
                done_or_end = compact_turn(
                    state,
                    ckpt,
                    events,
                    s,
                    provider=self.provider,
                    model=model,
                    hooks=self.hooks,
                    records=self.records,
                )
                if isinstance(done_or_end, TurnResult):
                    return done_or_end
                raise done_or_end
            plan = bind_plan(self.plan, self.provider, s)
            self._ensure_bound(state, plan)
            done = open_turn(
                state, ckpt, events, s, records=self.records, executor=self.executor, hooks=self.hooks
            )
            if done is not None:
                return done
            outcome, rows = self._run_rounds(state, ckpt, events, s, plan, model)
        except Terminal as t:
            outcome = t
        except CheckpointUnavailable as exc:
            outcome = Terminal(TerminationReason.CHECKPOINT_UNAVAILABLE, error=str(exc)[:500])
        except Exception as exc:  # a bug: end the turn with a clear reason, never hang the lane
            log.exception("turn %s of %s failed", state.turn_id, state.session_id)
            outcome = Terminal(TerminationReason.INTERNAL_ERROR, error=f"{type(exc).__name__}: {exc}"[:500])
        result = finish_turn(state, ckpt, events, outcome, self.records, rows)
        notify_idle(state, s, self.hooks)
        return result

    def _ensure_bound(self, state: TurnState, plan: BoundToolPlan | None) -> None:
        """Bind the plan at the executor; an executor that is down does not stop a text-only turn (calls
        made while it is unbound come back as typed errors, never as effects)."""
        if plan is None or state.plan_bound:
            return
        try:
            self.executor.bind_plan(plan)
            state.plan_bound = True
        except Exception as exc:
            log.warning("binding plan %s gen %d failed: %s", plan.content_hash[:12], plan.generation, exc)

    # --- phases 2-5 per round, verify on a stop proposal -------------------------------------------------
    def _run_rounds(
        self,
        state: TurnState,
        ckpt: Checkpointer,
        events: EventStream,
        s: LoopSettings,
        plan: BoundToolPlan | None,
        model: str,
    ) -> tuple[Terminal, list[TimelineEvent]]:
        """The outcome and, when it ends the turn, the verification's timeline row (still to write)."""
        judge = make_judge(self.judge_provider or self.provider, s.verify.judge_model or model)
        while True:
            candidate = self._until_stop(state, ckpt, events, s, plan, model)
            drop_settled(state, self.records)
            decision = verify(
                state,
                candidate.text,
                candidate.reason.value,
                settings=s,
                records=self.records,
                hooks=self.hooks,
                judge=judge if s.verify.judge else None,
                correlation={"session_id": state.session_id, "turn_id": state.turn_id},
                receipts_clear=ckpt.receipts_clear(plan),  # the last save's answer (RECEIPTS)
            )
            events.emit(
                TurnEventKind.VERIFY,
                attempt=state.guards.verify_attempt,
                action=decision.action,
                reason=decision.reason,
                misses=[m.name for m in decision.misses],
            )
            row = timeline_row(
                state,
                "verification.decided",
                {
                    "action": decision.action,
                    "reason": decision.reason,
                    "attempt": state.guards.verify_attempt,
                },
            )
            if decision.action == "accept":
                return candidate, [row]
            if decision.action == "escalate":
                return Terminal(
                    TerminationReason.EXTERNAL_VERIFICATION_REQUIRED,
                    text=candidate.text,
                    error=decision.reason,
                ), [row]
            state.guards.verify_attempt += 1
            state.continuation = decision.instruction
            state.history.append(
                Message(
                    role="user",
                    content=(TextBlock(text=f"[system:verification] {decision.instruction}"),),
                    metadata={"origin": "verification"},
                )
            )
            save_with_rows(ckpt, self.records, state, [row])  # the verdict's row in the save's write

    def _until_stop(
        self,
        state: TurnState,
        ckpt: Checkpointer,
        events: EventStream,
        s: LoopSettings,
        plan: BoundToolPlan | None,
        model: str,
    ) -> Terminal:
        """Rounds until the model proposes to stop (returned) or a guard ends the turn (raised)."""
        compact = Compactor(  # one summary attempt per compaction point (a failure is not retried per round)
            state, ckpt, s, provider=self.provider, model=model, hooks=self.hooks, records=self.records
        )
        while True:
            state.check_cancel()
            check_round_entry(state, s)
            squeeze = 0
            while True:  # phase 2 + 3, with bounded context recovery
                try:
                    prepared = prepare_call(
                        state,
                        provider=self.provider,
                        plan=plan,
                        settings=s,
                        prompt=self.prompt,
                        model=model,
                        squeeze=squeeze,
                        compact=compact,
                    )
                except ContextExhausted as exc:
                    raise Terminal(
                        TerminationReason.CONTEXT_EXHAUSTED, text=CONTEXT_NOTICE, error=str(exc)
                    ) from exc
                events.emit(
                    TurnEventKind.ROUND_START,
                    round=state.guards.round_index,
                    step_id=prepared.snapshot.step_id,
                    wrap_up=prepared.wrapping_up,
                )
                try:
                    response = call_model(self.provider, prepared.request, state, s, events)
                    break
                except ContextOverflow as exc:
                    state.context_recoveries += 1
                    if state.context_recoveries > s.context_recovery_attempts:
                        raise Terminal(
                            TerminationReason.CONTEXT_EXHAUSTED, text=CONTEXT_NOTICE, error=str(exc)[:300]
                        ) from exc
                    squeeze += 1
            # phase 4: process tools (usage and guards first)
            g, u = state.guards, response.usage
            g.input_tokens += u.input_tokens
            g.output_tokens += u.output_tokens
            g.cost_usd += u.cost_usd
            events.emit(
                TurnEventKind.TOKENS,
                model=response.model or model,
                input=u.input_tokens,
                output=u.output_tokens,
                cost=u.cost_usd,
            )
            if check_cost(state, s):  # 80 % of the cost budget: warn once
                events.emit(
                    TurnEventKind.TOKENS,
                    model=response.model or model,
                    input=0,
                    output=0,
                    cost=0.0,
                    budget_warning=True,
                    spent=g.cost_usd,
                    budget=s.cost_budget_usd,
                )
            state.last_text = response.text
            if response.stop_reason == StopReason.REFUSAL:
                raise Terminal(TerminationReason.MODEL_REFUSAL, text=response.text, error="the model refused")
            snap = prepared.snapshot
            calls = response.tool_calls if snap.plan is not None else ()
            if not calls:
                body = response.text or "(no answer)"
                state.history.append(
                    Message(
                        role="assistant", content=(TextBlock(text=body),), metadata={"step_id": snap.step_id}
                    )
                )
                g.round_index += 1
                reason = TerminationReason.FORCED_TEXT if prepared.wrapping_up else TerminationReason.NATURAL
                return Terminal(reason, text=response.text)

            def observe(results: list, calls: tuple = calls) -> None:  # type: ignore[type-arg]
                # phase 5: observe and compact (the view is compacted when the next call is prepared)
                state.cognitive.last_action = ",".join(c.name for c in calls)
                state.cognitive.observe(
                    "; ".join(f"{r.name}:{'error' if r.is_error else 'ok'}" for r in results)
                )
                state.cognitive.round_count += 1
                state.guards.round_index += 1
                observe_batch(state, s, [(c.name, c.input) for c in calls], results)

            self._ensure_bound(state, plan)
            process_batch(
                snap,
                response.text,
                calls,
                state=state,
                executor=self.executor,
                checkpoint=ckpt,
                events=events,
                settings=s,
                save_meta={},
                observe=observe,
                records=self.records,
            )
