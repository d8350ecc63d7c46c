"""Verify: a stop proposal becomes completion only through a structural check, an opt-in judge and hooks.

Policy when no hook decides: passed → accept; retryable miss → revise; non-retryable miss → escalate. A hook
cannot turn a failure into a pass (``accept`` on a failure escalates). Revisions run within a repair budget.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from geode.loop.ports import LoopHooks
from geode.loop.settings import LoopSettings
from geode.loop.state import TurnState
from geode.records.client import RecordClient

log = logging.getLogger(__name__)

DEFAULT_INSTRUCTION = (
    "Verification: retry required. Rubric misses: {misses}. Required action: repair the candidate, re-check "
    "relevant evidence, and return a corrected result."
)

# judge(candidate, user_text) -> (passed, score, note); raising means "judge unavailable" (never withholds).
Judge = Callable[[str, str], tuple[bool, float, str]]


@dataclass(frozen=True)
class Miss:
    name: str
    retryable: bool


@dataclass
class VerifyDecision:
    action: str  # accept | revise | escalate
    reason: str = ""
    instruction: str = ""
    misses: list[Miss] = field(default_factory=list)
    judge_note: str = ""

    @property
    def passed(self) -> bool:
        return not self.misses


def structural_misses(
    state: TurnState, candidate: str, records: RecordClient, *, receipts_clear: bool = False
) -> list[Miss]:
    """``receipts_clear``: the turn's last save proved the session holds no uncertain receipt
    (:meth:`geode.loop.checkpoint.Checkpointer.receipts_clear`); the store is not asked again."""
    misses: list[Miss] = []
    if not candidate.strip():
        if state.guards.tool_calls == 0:
            misses.append(Miss("empty_turn", True))
        elif state.last_batch_all_errors:
            misses.append(Miss("unanswered_errors", True))
        else:
            misses.append(Miss("empty_answer", True))
    try:
        unresolved = (
            [] if receipts_clear else records.list_receipts(session_id=state.session_id, uncertain_only=True)
        )
    except Exception as exc:  # the store being down must not withhold an ordinary answer
        log.warning("verify: receipts unavailable for %s: %s", state.session_id, exc)
        unresolved = []
    if unresolved or state.unresolved:
        misses.append(Miss("unresolved_receipts", False))
    return misses


def verify(
    state: TurnState,
    candidate: str,
    reason: str,
    *,
    settings: LoopSettings,
    records: RecordClient,
    hooks: LoopHooks,
    judge: Judge | None,
    correlation: dict[str, str],
    receipts_clear: bool = False,
) -> VerifyDecision:
    misses = structural_misses(state, candidate, records, receipts_clear=receipts_clear)
    note = ""
    if settings.verify.judge and judge is not None and not misses:
        budget = settings.verify.judge_timeout_s
        if settings.time_budget_s:
            budget = min(budget, settings.time_budget_s - state.elapsed())
        try:
            if budget <= 0:
                raise TimeoutError("no time budget left for the judge")
            passed, score, note = _bounded(judge, candidate, state.user_text, budget)
            if not passed:
                misses.append(Miss("judge_failed", True))
            note = f"score={score:.2f} {note}".strip()
        except Exception as exc:
            note = f"judge unavailable: {exc}"[:300]
            log.warning("verify judge unavailable: %s", exc)
    retry = bool(misses) and all(m.retryable for m in misses)
    attempt = state.guards.verify_attempt
    payload = {
        "termination_reason": reason,
        "rounds": state.guards.round_index,
        "tool_call_count": state.guards.tool_calls,
        "candidate_summary": candidate[:4000],
        "passed": not misses,
        "rubric_misses": [m.name for m in misses],
        "should_retry": retry,
        "verify_attempt": attempt,
        "mode": "llm_judge" if settings.verify.judge else "structural",
    }
    if not misses:
        action, instruction, why = "accept", "", "passed"
    elif retry:
        action = "revise"
        instruction = DEFAULT_INSTRUCTION.format(misses=", ".join(m.name for m in misses))
        why = "retryable miss"
    else:
        action, instruction, why = "escalate", "", "non-retryable miss: " + ", ".join(m.name for m in misses)
    hook = hooks.post_verify(payload, correlation)
    if hook.action in ("accept", "revise", "escalate"):
        if hook.action == "accept" and misses:
            action, why = "escalate", "hook accepted a failed verification"
        else:
            action, why = hook.action, hook.reason or f"PostVerify {hook.action}"
            if action == "revise":
                instruction = (
                    hook.instruction
                    or hook.reason
                    or instruction
                    or DEFAULT_INSTRUCTION.format(misses="post_verify")
                )
    if action == "accept":
        stop = hooks.stop({**payload, "policy_action": "accept"}, correlation)
        if stop.action == "continue" and (stop.instruction or stop.reason):
            action, instruction, why = (
                "revise",
                stop.instruction or stop.reason,
                "Stop hook asked to continue",
            )
        elif stop.action == "escalate":
            action, why = "escalate", stop.reason or "Stop hook escalated"
    if action == "revise" and attempt >= settings.verify.repair_budget:
        action, why = "escalate", f"repair budget ({settings.verify.repair_budget}) exhausted"
    return VerifyDecision(action=action, reason=why, instruction=instruction, misses=misses, judge_note=note)


def _bounded(judge: Judge, candidate: str, user_text: str, timeout_s: float) -> tuple[bool, float, str]:
    """Run the judge with a deadline (its thread is abandoned on timeout: the answer is not withheld)."""
    box: dict[str, object] = {}
    done = threading.Event()

    def run() -> None:
        try:
            box["out"] = judge(candidate, user_text)
        except Exception as exc:
            box["err"] = exc
        finally:
            done.set()

    threading.Thread(target=run, name="verify-judge", daemon=True).start()
    if not done.wait(timeout_s):
        raise TimeoutError(f"judge did not answer within {timeout_s:.0f}s")
    if "err" in box:
        raise box["err"]  # type: ignore[misc]
    return box["out"]  # type: ignore[return-value]


def parse_judge_reply(text: str) -> tuple[bool, float, str]:
    """Parse ``{"passed": bool, "score": 0..1, "reflection": {...}}`` (first JSON object in the text)."""
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end <= start:
        raise ValueError("judge reply has no JSON object")
    data = json.loads(text[start : end + 1])
    lesson = ""
    if isinstance(data.get("reflection"), dict):
        lesson = str(data["reflection"].get("lesson", ""))[:200]
    return bool(data.get("passed")), float(data.get("score", 0.0)), lesson
