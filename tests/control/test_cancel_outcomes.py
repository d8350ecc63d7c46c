"""How a cancelled call settles: a run_bash group killed before it exited is *not applied*; one that had
already exited may have finished (*uncertain*); any other handler's own failure keeps its known outcome."""

from __future__ import annotations

from geode.loop.batch import cancel_report
from geode.tools.executor import cancelled_result
from geode.tools.spec import ToolCall, ToolResult

CALL = ToolCall(id="tu-1", name="run_bash", input={"command": "sleep 8; echo done > f"})


def _bash_cancelled(**body: object) -> ToolResult:
    return ToolResult.error(
        CALL, "Command cancelled; its process group was killed.", "bash_cancelled", executed=True, **body
    )


def test_killed_before_exit_is_not_applied() -> None:
    result, unknown = cancelled_result(CALL, _bash_cancelled(exit_code=-15, signal="SIGTERM"), receipted=True)
    assert not unknown and result.executed is False and result.error_type == "bash_cancelled"
    assert result.content["applied"] is False and result.content["cancelled"] is True
    assert result.content["signal"] == "SIGTERM" and "not applied" in result.content["error"]


def test_exited_before_the_kill_is_uncertain() -> None:
    result, unknown = cancelled_result(CALL, _bash_cancelled(exit_code=0), receipted=True)
    assert unknown and result.executed is None and result.error_type == "effect_outcome_uncertain"


def test_other_failures_keep_their_outcome() -> None:
    failed = ToolResult.error(CALL, "boom", "handler_error", executed=True)
    assert cancelled_result(CALL, failed, receipted=True) == (failed, False)


def test_the_answer_says_what_ran() -> None:
    killed, _ = cancelled_result(CALL, _bash_cancelled(exit_code=-15, signal="SIGTERM"), receipted=True)
    ran = ToolResult(tool_use_id="tu-0", name="read_file", content={"ok": True}, executed=True)
    never = ToolResult.error(ToolCall(id="tu-2", name="write_file"), "cancelled before sent", "cancelled")
    unknown = ToolResult.error(
        ToolCall(id="tu-3", name="web_fetch"), "?", "cancelled_outcome_unknown", executed=None
    )
    assert cancel_report([ran, killed, never, unknown]) == (
        "read_file: ran; run_bash: cancelled, not applied; write_file: not started; "
        "web_fetch: cancelled, outcome unknown (see geode receipts --uncertain)."
    )
