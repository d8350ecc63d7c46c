"""What a dispatched call's outcome means for its result and receipt: a value, a known failure, a deadline
passed with the work maybe still running (unknown), a crash, or a command GEODE itself stopped after it began
(``interrupted``: a known end with an unknown effect, committed and never re-run)."""

from __future__ import annotations

from typing import Any

from geode.tools.dispatch import Outcome
from geode.tools.receipts import uncertain_result
from geode.tools.spec import ToolCall, ToolResult

INTERRUPTED = "interrupted"
WHO = {"cancel": "a cancel", "deadline": "its deadline"}  # who stopped it, as the message says


def handler_result(
    call: ToolCall, out: Outcome, deadline_s: float, receipted: bool
) -> tuple[ToolResult, bool]:
    """(result, outcome unknown?) of one dispatch."""
    if out.status == "ok":
        content = out.value if out.value is not None else {"ok": True}
        return ToolResult(tool_use_id=call.id, name=call.name, content=content, executed=True), False
    if out.status == "failed":
        exc = out.error
        msg, etype, extra = exc.message, exc.error_type, exc.extra  # type: ignore[union-attr]
        failed = ToolResult.error(call, msg, etype, executed=True, **extra)
        return (interrupted(call, failed) if extra.get("interrupted_by") else failed), False
    if out.status == "timeout":
        more: dict[str, Any] = {"timeout": True, "recoverable": False}
        if receipted:
            more["outcome_uncertain"] = True
        msg = (
            f"{call.name} exceeded its {deadline_s:.0f}s deadline and was aborted by the harness. "
            "The operation may still be running."
        )
        return ToolResult.error(call, msg, "tool_timeout", executed=None, **more), True
    err = out.error
    if receipted:
        return uncertain_result(call, f"the handler raised {type(err).__name__}: {err}"[:300]), True
    return ToolResult.error(call, f"{type(err).__name__}: {err}"[:500], "tool_error", executed=True), False


def interrupted(call: ToolCall, failed: ToolResult) -> ToolResult:
    """A handler that reports GEODE stopped its work after it began (``interrupted_by``: cancel | deadline):
    the command ran and was stopped, so it may have partly run. That end is known, so the receipt commits it
    (nothing is quarantined, a resume replays this result) and every view says ``interrupted``."""
    body = dict(failed.content) if isinstance(failed.content, dict) else {}
    by = str(body.get("interrupted_by"))
    seconds = body.get("seconds")
    ran = f" after {seconds:.1f}s" if isinstance(seconds, int | float) else ""
    how = body.get("signal") or (f"exit {body['exit_code']}" if body.get("exit_code") is not None else "")
    msg = (
        f"Interrupted by {WHO.get(by, by)}{ran}{f' ({how})' if how else ''}: '{call.name}' was stopped "
        "while it ran and may have partly run. It will not be re-run; check its effects before repeating it."
    )
    keep = {k: v for k, v in body.items() if k not in ("error", "error_type")}
    keep.update(outcome=INTERRUPTED, may_have_partly_run=True)
    return ToolResult.error(call, msg, str(failed.error_type), executed=True, **keep)


def is_interrupted(result: ToolResult) -> bool:
    return isinstance(result.content, dict) and result.content.get("outcome") == INTERRUPTED
