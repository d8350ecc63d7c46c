"""How a stopped call settles: a run_bash command GEODE stopped after it began (a cancel, its deadline) is
*interrupted* — a known end with an unknown effect, committed, never "not applied"; a handler's other failure
keeps its own, known outcome; the cancelled turn's answer says what each call did."""

from __future__ import annotations

from geode.loop.batch import cancel_report
from geode.tools.dispatch import Outcome
from geode.tools.handlers import ToolFailure
from geode.tools.outcomes import handler_result
from geode.tools.spec import ToolCall, ToolResult

CALL = ToolCall(id="tu-1", name="run_bash", input={"command": "echo started > p; sleep 8; echo done >> p"})


def _stopped(error_type: str, by: str, **body: object) -> tuple[ToolResult, bool]:
    failure = ToolFailure(
        "Command cancelled; all its processes were killed.", error_type, interrupted_by=by, **body
    )
    return handler_result(CALL, Outcome("failed", error=failure), 30.0, receipted=True)


def test_a_cancelled_command_is_interrupted_not_unapplied() -> None:
    result, unknown = _stopped("bash_cancelled", "cancel", exit_code=-15, signal="SIGTERM", seconds=2.04)
    assert not unknown  # a known end: the receipt is committed, nothing is quarantined
    body = result.content
    assert result.executed is True and result.error_type == "bash_cancelled"
    assert body["outcome"] == "interrupted" and body["may_have_partly_run"] is True
    assert body["signal"] == "SIGTERM" and body["seconds"] == 2.04
    assert "Interrupted by a cancel after 2.0s (SIGTERM)" in body["error"]
    assert "may have partly run" in body["error"]
    assert "not applied" not in body["error"] and "applied" not in body


def test_a_command_past_its_deadline_is_interrupted() -> None:
    result, unknown = _stopped("bash_timeout", "deadline", exit_code=-15, signal="SIGTERM", seconds=1.0)
    assert not unknown and result.content["outcome"] == "interrupted"
    assert "Interrupted by its deadline after 1.0s" in result.content["error"]


def test_other_failures_keep_their_outcome() -> None:
    failure = ToolFailure("boom", "handler_error")
    result, unknown = handler_result(CALL, Outcome("failed", error=failure), 30.0, receipted=True)
    assert not unknown and result.error_type == "handler_error" and "outcome" not in result.content


def test_the_answer_says_what_ran() -> None:
    stopped, _ = _stopped("bash_cancelled", "cancel", exit_code=-15, signal="SIGTERM", seconds=2.04)
    ran = ToolResult(tool_use_id="tu-0", name="read_file", content={"ok": True}, executed=True)
    never = ToolResult.error(ToolCall(id="tu-2", name="write_file"), "cancelled before sent", "cancelled")
    unknown = ToolResult.error(
        ToolCall(id="tu-3", name="web_fetch"), "?", "cancelled_outcome_unknown", executed=None
    )
    assert cancel_report([ran, stopped, never, unknown]) == (
        "read_file: ran; run_bash: interrupted after 2.0s, may have partly run; write_file: not started; "
        "web_fetch: cancelled, outcome unknown (see geode receipts --uncertain)."
    )
