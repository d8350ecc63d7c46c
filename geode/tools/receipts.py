"""Effect-receipt glue: admit before dispatch, map admission outcomes to results, commit or mark uncertain."""

from __future__ import annotations

import logging
from functools import partial
from typing import Any

from geode.records.client import RecordClient
from geode.records.models import AdmitKind, AdmitResult, Observation, ReceiptIdentity
from geode.redaction import fingerprint, redact, redact_text
from geode.tools.spec import DataClass, EffectClass, ToolCall, ToolContext, ToolResult, ToolSpec
from geode.tools.structured_text import recarry

log = logging.getLogger(__name__)
PERSONAL_FINGERPRINT = "personal-data-redacted"
OMITTED = "[omitted: personal data]"


def needs_receipt(spec: ToolSpec) -> bool:
    return spec.policy.effect is not EffectClass.READ


def identity(ctx: ToolContext, call: ToolCall, spec: ToolSpec) -> ReceiptIdentity:
    personal = spec.policy.data_class is DataClass.PERSONAL
    fp = PERSONAL_FINGERPRINT if personal else fingerprint({"tool_name": call.name, "arguments": call.input})
    return ReceiptIdentity(
        session_id=ctx.session_id,
        turn_id=ctx.turn_id,
        step_id=ctx.step_id,
        tool_name=call.name,
        fingerprint=fp,
    )


class Receipts:
    """Talks to the record store's receipt API on behalf of one executor incarnation (``owner``)."""

    def __init__(self, records: RecordClient | None, owner: str) -> None:
        self._records = records
        self.owner = owner

    def admit(
        self, ctx: ToolContext, call: ToolCall, spec: ToolSpec, *, observation: Observation | None = None
    ) -> ToolResult | None:
        """``None`` → admitted now, run the handler. A ToolResult → return it without dispatch.
        ``observation``: how to settle it by looking if its outcome becomes unknown (kept in the receipt)."""
        if self._records is None or not ctx.operation_id:
            why = "no record store" if self._records is None else "no operation id"
            return ToolResult.error(
                call,
                f"Effect receipts are unavailable ({why}); '{call.name}' was not run.",
                "effect_receipt_unavailable",
                recoverable=False,
            )
        try:
            res: AdmitResult = self._records.admit(
                ctx.operation_id,
                identity(ctx, call, spec),
                owner=self.owner,
                effect=spec.policy.effect.value,
                observation=observation,
            )
        except Exception as exc:
            log.warning("receipt admit failed for %s: %s", ctx.operation_id, redact_text(str(exc), 500))
            return ToolResult.error(
                call,
                f"Effect receipt store unavailable ({type(exc).__name__}); '{call.name}' was not run.",
                "effect_receipt_unavailable",
                recoverable=False,
            )
        if res.kind is AdmitKind.NEW:
            return None
        if res.kind is AdmitKind.REPLAY:
            return replayed(call, res.result or {})
        if res.kind is AdmitKind.UNCERTAIN:
            return uncertain_result(
                call, res.reason or "an earlier attempt's outcome is unknown", blocking=res.blocking_operation
            )
        return ToolResult.error(
            call,
            f"Operation {ctx.operation_id} was already used for a different call ({res.reason}).",
            "effect_operation_conflict",
            recoverable=False,
        )

    def commit(self, ctx: ToolContext, spec: ToolSpec, result: ToolResult) -> ToolResult:
        """Store the final (redacted) result; a failed commit turns the result into an uncertain outcome."""
        assert self._records is not None
        stored = result.model_dump(mode="json")
        if spec.policy.data_class is DataClass.PERSONAL:
            stored["content"] = OMITTED
        else:
            bound = partial(
                redact, max_str=12_000, max_items=128
            )  # a carried text stays text (its object bound)
            stored["content"] = recarry(stored["content"], bound)
        try:
            self._records.commit(ctx.operation_id, stored)
        except Exception as exc:
            log.warning("receipt commit failed for %s: %s", ctx.operation_id, redact_text(str(exc), 500))
            call = ToolCall(id=result.tool_use_id, name=result.name)
            return uncertain_result(call, f"the result could not be recorded ({type(exc).__name__})")
        return result

    def mark_uncertain(self, ctx: ToolContext, reason: str) -> None:
        if self._records is None:
            return
        try:
            self._records.mark_uncertain(ctx.operation_id, reason)
        except Exception as exc:  # the store also marks a dead owner's receipts; log and go on
            log.warning("mark_uncertain failed for %s: %s", ctx.operation_id, redact_text(str(exc), 500))


def replayed(call: ToolCall, stored: dict[str, Any]) -> ToolResult:
    """The committed result of an earlier run of this very operation (the handler is not called again)."""
    data = {**stored, "tool_use_id": call.id, "name": call.name}
    try:
        return ToolResult.model_validate(data)
    except Exception:
        return ToolResult(tool_use_id=call.id, name=call.name, content=stored, executed=True)


def uncertain_result(call: ToolCall, reason: str, *, blocking: str | None = None) -> ToolResult:
    extra: dict[str, Any] = {"outcome_uncertain": True, "recoverable": False}
    if blocking:
        extra["blocking_operation"] = blocking
    return ToolResult.error(
        call,
        f"The outcome of '{call.name}' is unknown ({reason}); it may have been applied. It won't be re-run "
        "until an operator reconciles it (geode reconcile).",
        "effect_outcome_uncertain",
        executed=None,
        **extra,
    )
