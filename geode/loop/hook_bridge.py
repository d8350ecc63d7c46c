"""Adapts the shared HookRunner (``run(event, payload, correlation)``) to the loop's :class:`LoopHooks`.

Mapping: PostVerify ``block`` → revise (instruction or reason), ``halt`` → escalate, ``allow`` → accept, an
explicit ``updates.action`` wins. Stop ``block`` → continue with the instruction, ``halt`` → escalate.
UserPromptSubmit ``block``/``halt`` → block, ``updates.prompt`` → rewrite. PreCompact ``block``/``halt`` →
block (the summary is not made; the deterministic view stays). SessionStart → its ``additionalContext``.
``observe`` runs an observation event (PostCompact, Notification: never decides).
"""

from __future__ import annotations

from typing import Any, Protocol

from geode.loop.ports import HookOutcome


class _Runner(Protocol):
    def run(self, event: Any, payload: dict[str, Any], correlation: dict[str, Any]) -> Any: ...


class RunnerHooks:
    def __init__(self, runner: _Runner) -> None:
        self.runner = runner

    def _run(self, event: str, payload: dict[str, Any], corr: dict[str, str]) -> Any:
        return self.runner.run(event, payload, corr)

    def user_prompt_submit(self, payload: dict[str, Any], correlation: dict[str, str]) -> HookOutcome:
        out = self._run("UserPromptSubmit", payload, correlation)
        if out.decision == "block" or out.halt:
            return HookOutcome(action="block", reason=out.reason)
        prompt = (out.updates or {}).get("prompt")
        if isinstance(prompt, str) and prompt != payload.get("prompt"):
            return HookOutcome(action="rewrite", updates={"prompt": prompt}, reason=out.reason)
        return HookOutcome(reason=out.reason, instruction=out.additional_context or "")

    def post_verify(self, payload: dict[str, Any], correlation: dict[str, str]) -> HookOutcome:
        out = self._run("PostVerify", payload, correlation)
        explicit = (out.updates or {}).get("action")
        if explicit in ("accept", "revise", "escalate"):
            action = explicit
        elif out.halt:
            action = "escalate"
        elif out.decision == "block":
            action = "revise"
        elif out.decision == "allow":
            action = "accept"
        else:
            action = "continue"
        return HookOutcome(action=action, reason=out.reason, instruction=out.instruction or out.reason or "")

    def stop(self, payload: dict[str, Any], correlation: dict[str, str]) -> HookOutcome:
        out = self._run("Stop", payload, correlation)
        if out.halt:
            return HookOutcome(action="escalate", reason=out.reason)
        if out.decision == "block":
            return HookOutcome(
                action="continue", reason=out.reason, instruction=out.instruction or out.reason or ""
            )
        return HookOutcome(action="finalize", reason=out.reason)

    def pre_compact(self, payload: dict[str, Any], correlation: dict[str, str]) -> HookOutcome:
        out = self._run("PreCompact", payload, correlation)
        if out.decision == "block" or out.halt:
            return HookOutcome(action="block", reason=out.reason)
        return HookOutcome(reason=out.reason)

    def session_start(self, payload: dict[str, Any], correlation: dict[str, str]) -> str:
        """SessionStart runs to the end (its context is wanted); a failing hook adds nothing."""
        return str(self._run("SessionStart", payload, correlation).additional_context or "")

    def observe(self, event: str, payload: dict[str, Any], correlation: dict[str, str]) -> None:
        self._run(event, payload, correlation)
