"""The compaction step of a round (phase 2): when the effective history passes ``compact_at`` of the view's
budget, run PreCompact, ask the model for a summary (:mod:`geode.loop.summarize`), store it as one compaction
record (checkpoint), then PostCompact and SessionStart(source "compact"). Every failure leaves the
deterministic view (the floor) and the turn goes on; one attempt per compaction point per turn incarnation.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from geode.faults import fault
from geode.loop.checkpoint import Checkpointer
from geode.loop.compaction import estimate_tokens
from geode.loop.session_hooks import correlation, session_start
from geode.loop.settings import LoopSettings
from geode.loop.state import TurnState
from geode.loop.summarize import SummaryFailed, compaction_id, cut_point, effective_history, summarize
from geode.providers.types import Provider
from geode.records.client import RecordClient
from geode.records.models import TimelineEvent

log = logging.getLogger(__name__)


class Compactor:
    """Bound to one turn: ``compactor(budget_tokens)`` before the view is built (prepare_call)."""

    def __init__(
        self,
        state: TurnState,
        ckpt: Checkpointer,
        settings: LoopSettings,
        *,
        provider: Provider,
        model: str,
        hooks: Any,
        records: RecordClient,
    ) -> None:
        self.state, self.ckpt, self.s = state, ckpt, settings
        self.provider, self.model, self.hooks, self.records = provider, model, hooks, records
        self.tried: set[int] = set()  # compaction points attempted by this incarnation of the turn

    def __call__(self, budget_tokens: int) -> None:
        st, s = self.state, self.s
        if not s.compaction_summary:
            return
        if estimate_tokens(effective_history(st.history)) <= budget_tokens * s.compact_at:
            return
        cut = cut_point(st.history, budget_tokens)
        if cut is None or cut in self.tried:
            return
        self.tried.add(cut)
        self.compact(cut, budget_tokens)

    def compact(self, cut: int, budget_tokens: int, *, trigger: str = "auto") -> str:
        """Summarize ``history[..cut]`` and store the record once; what happened, in a few words ("stored",
        "already stored", "blocked by PreCompact: …", "failed: …"). ``trigger``: "auto" (near the window)
        or "manual" (the chat's ``/compact``, :mod:`geode.loop.compact_now`)."""
        st, s = self.state, self.s
        key = compaction_id(st.session_id, cut)
        if any(m.metadata.get("compaction_id") == key for m in st.history):
            return "already stored"  # stored by an earlier incarnation (the view already uses it)
        corr = correlation(st, s)
        pre = getattr(self.hooks, "pre_compact", None)
        if pre is not None:
            out = pre({"trigger": trigger, "custom_instructions": ""}, corr)
            if out.action == "block":
                self._timeline(key, "compaction.blocked", {"reason": out.reason[:300]})
                log.info("compaction of %s blocked by PreCompact: %s", st.session_id, out.reason)
                return f"blocked by PreCompact: {out.reason}"[:300]
        try:
            done = summarize(
                st.history,
                cut,
                session_id=st.session_id,
                turn_id=st.turn_id,
                provider=self.provider,
                model=self.model,
                max_tokens=s.compaction_summary_tokens,
                budget_tokens=budget_tokens,
                timeout_s=s.compaction_timeout_s,
                cancel=st.cancel,
            )
        except SummaryFailed as exc:
            self._timeline(key, "compaction.failed", {"error": str(exc)[:300]})
            log.warning("compaction summary for %s failed (deterministic view): %s", st.session_id, exc)
            return f"failed: {exc}"[:300]
        u = done.response.usage
        st.guards.input_tokens += u.input_tokens
        st.guards.output_tokens += u.output_tokens
        st.guards.cost_usd += u.cost_usd
        st.history.append(done.record)
        self.ckpt.save(st, strict=False)  # a failed save: the record rides the next save
        fault("loop.after_compaction_record")
        self._timeline(
            key,
            "compaction.summarized",
            {"covers": cut, "dropped": done.dropped, "chars": len(done.record.text)},
        )
        observe = getattr(self.hooks, "observe", None)
        if observe is not None:
            observe("PostCompact", {"trigger": trigger, "compact_summary": done.record.text}, corr)
        session_start(st, s, self.hooks, "compact")
        return "stored"

    def _timeline(self, key: str, kind: str, payload: dict[str, Any]) -> None:
        try:
            self.records.append_timeline(
                TimelineEvent(
                    session_id=self.state.session_id,
                    event_id=f"{self.state.turn_id}:{kind}:{key}",
                    kind=kind,
                    ts=time.time(),
                    payload={"compaction_id": key, **payload},
                )
            )
        except Exception as exc:  # observation only
            log.debug("timeline %s not written: %s", kind, exc)
