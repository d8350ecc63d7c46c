"""The approval prompt (asks again on nonsense, `n: reason`), the `⎿` line and the result summaries."""

from __future__ import annotations

import io

from actors.cli.render import Renderer, ask_terminal, parse_answer, tool_end_line
from geode.tools.result_summary import result_summary
from geode.tools.spec import ToolCall, ToolResult

WRITE = {"tool_name": "write_file", "safety_level": "mutate/public", "detail": "x.txt"}


def _ask(answers: str, data: dict | None = None) -> tuple[str, str]:
    out = io.StringIO()
    got = ask_terminal(data or WRITE, stdin=io.StringIO(answers), out=out)
    return got, out.getvalue()


def test_an_invalid_answer_asks_again():
    got, shown = _ask("maybe\nperhaps\ny\n")
    assert got == "y"
    assert shown.count("is not an answer") == 2 and shown.count("> ") == 3


def test_a_denial_carries_its_reason():
    assert _ask("n: because the file is generated\n")[0] == "n: because the file is generated"
    assert _ask("no   it is   generated\n")[0] == "n: it is generated"
    assert _ask("n\n")[0] == "n"
    assert _ask("maybe\n")[0] == "n"  # end of input after nonsense: deny


def test_always_is_not_an_answer_for_personal_data():
    personal = {**WRITE, "safety_level": "read/personal"}
    got, shown = _ask("a\ny\n", personal)
    assert got == "y" and "is not an answer" in shown
    assert parse_answer("a") == "a" and parse_answer("always", sensitive=True) is None


def test_tool_end_lines_show_the_summary():
    assert tool_end_line({"name": "read_file", "summary": "read 3 lines"}) == "  ⎿ read_file · read 3 lines"
    blocked = tool_end_line({"name": "write_file", "error": "hook_blocked", "summary": "no writes on Friday"})
    assert blocked == "  ⎿ write_file ✗ hook_blocked · no writes on Friday"
    assert tool_end_line({"name": "t"}) == "  ⎿ t ok"
    out = io.StringIO()
    Renderer(out)({"kind": "tool_end", "data": {"name": "run_bash", "summary": "exit 0 · done"}})
    assert out.getvalue() == "  ⎿ run_bash · exit 0 · done\n"


def _ok(content: object) -> ToolResult:
    return ToolResult(tool_use_id="1", name="t", content=content)


def test_result_summaries():
    assert result_summary(_ok({"file_path": "a", "lines": 12, "total_lines": 40})) == "read 12 lines of 40"
    assert result_summary(_ok({"file_path": "a", "bytes": 5, "created": True})) == "created 5 bytes"
    assert result_summary(_ok({"file_path": "a", "bytes": 1, "created": False})) == "wrote 1 byte"
    bash = {"exit_code": 2, "stdout": "one\ntwo\n\n", "stderr": ""}
    assert result_summary(_ok(bash)) == "exit 2 · two"
    call = ToolCall(id="1", name="write_file", input={})
    blocked = ToolResult.error(call, "Blocked by a PreToolUse hook (h).", "hook_blocked", reason="not today")
    assert result_summary(blocked) == "not today"
    denied = ToolResult.error(call, "User denied 'w' with this reason: x. Do NOT retry this tool.", "n")
    assert result_summary(denied) == "User denied 'w' with this reason: x."
