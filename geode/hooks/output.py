"""A hook's answer (Claude Code JSON contract) validated at the boundary, then turned into a HookOutcome;
a malformed answer is a HookInvalidOutput with a one-line reason, never an AttributeError."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictStr, ValidationError

from geode.hooks.events import HookOutcome

Permission = Literal["allow", "deny", "ask"]


class HookFailed(Exception):
    """The hook crashed, timed out or printed something that is not a JSON object."""


class HookInvalidOutput(HookFailed):
    """The hook printed a JSON object whose decision fields do not validate (the message says which)."""


class PermissionRequestDecision(BaseModel):
    model_config = ConfigDict(extra="allow")
    behavior: Permission | None = None
    message: StrictStr | None = None


class HookSpecificOutput(BaseModel):
    model_config = ConfigDict(extra="allow")
    hookEventName: StrictStr | None = None
    permissionDecision: Permission | None = None
    permissionDecisionReason: StrictStr | None = None
    decision: PermissionRequestDecision | None = None
    updatedInput: dict[str, Any] | None = None
    updatedToolName: StrictStr | None = None
    additionalContext: StrictStr | None = None


class HookOutput(BaseModel):
    """The fields GEODE reads; unknown keys are allowed (Claude Code adds some), known ones must be typed."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)
    decision: Literal["approve", "block"] | None = None
    reason: StrictStr | None = None
    continue_: StrictBool | None = Field(default=None, alias="continue")
    stopReason: StrictStr | None = None
    suppressOutput: StrictBool | None = None
    systemMessage: StrictStr | None = None
    hookSpecificOutput: HookSpecificOutput | None = None


def validate_output(data: dict[str, Any]) -> HookOutput:
    """``data`` as a HookOutput, or HookInvalidOutput naming the first bad fields on one line."""
    try:
        return HookOutput.model_validate(data)
    except ValidationError as exc:
        raise HookInvalidOutput(describe(exc)) from None


def describe(exc: ValidationError, limit: int = 3) -> str:
    parts = []
    for err in exc.errors()[:limit]:
        where = ".".join(str(p) for p in err.get("loc", ())) or "output"
        got = repr(err.get("input"))
        got = got if len(got) <= 60 else got[:57] + "..."
        parts.append(f"{where}: {err.get('msg', 'invalid')} (got {got})")
    more = len(exc.errors()) - limit
    return "; ".join(parts) + (f"; and {more} more" if more > 0 else "")


def parse_output(data: dict[str, Any]) -> HookOutcome:
    """Claude Code hook output → outcome (hookSpecificOutput wins over the legacy top-level fields)."""
    out = validate_output(data)
    hso = out.hookSpecificOutput or HookSpecificOutput()
    decision = "continue"
    reason = out.reason or ""
    if out.decision == "block":
        decision = "block"
    elif out.decision == "approve":
        decision = "allow"
    pd = hso.permissionDecision or (hso.decision.behavior if hso.decision else None)
    if pd is not None:
        decision = "block" if pd == "deny" else pd
        message = hso.decision.message if hso.decision else None
        reason = hso.permissionDecisionReason or message or reason
    updates: dict[str, Any] = {}
    if hso.updatedInput is not None:
        updates["tool_input"] = hso.updatedInput
    if hso.updatedToolName is not None:
        updates["tool_name"] = hso.updatedToolName
    halt = out.continue_ is False
    if halt:
        reason = out.stopReason or reason or "stopped by hook"
    return HookOutcome(
        decision=decision,  # type: ignore[arg-type]
        reason=reason,
        updates=updates,
        additional_context=hso.additionalContext or None,
        instruction=reason if decision == "block" and reason else None,
        halt=halt,
    )
