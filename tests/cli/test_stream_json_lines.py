"""The stream-json lines of the events a served tree test does not arrange (queueing, retries, a fallback, a
call whose arguments outgrow the stream's preview, a denial with a reason): each said as its own line."""

from __future__ import annotations

import io
import json
from typing import Any

from actors.cli.stream_json import StreamJson


def _lines(events: list[dict[str, Any]], answers: list[str] | None = None) -> list[dict[str, Any]]:
    out = io.StringIO()
    stream = StreamJson(out)
    stream.init(
        {"model": "m", "provider": "p", "workspace": "/w", "server_version": "1"},
        "s-1",
        cwd="/c",
        asks="terminal",
    )
    ask = stream.approver(lambda _data: (answers or ["n"]).pop(0))
    for ev in events:
        stream({"session_id": "s-1", "turn_id": "t-1", **ev})
        if ev["kind"] == "approval":
            ask(ev["data"])
    stream.result({"text": "x", "session_id": "s-1", "turn_id": "t-1", "exit_code": 0})
    return [json.loads(line) for line in out.getvalue().splitlines()]


def test_queueing_retries_and_fallback_are_system_lines_and_a_position_0_queue_is_not_said() -> None:
    lines = _lines(
        [
            {"kind": "turn_queued", "data": {"position": 0}},
            {"kind": "turn_queued", "data": {"position": 2}},
            {
                "kind": "llm_retry",
                "data": {"attempt": 1, "error_kind": "overloaded", "message": "retrying in 1 s"},
            },
            {"kind": "fallback", "data": {"from_model": "a", "to_model": "b"}},
            {"kind": "tokens", "data": {"input": 3}},
        ]
    )
    assert [(ln["type"], ln.get("subtype")) for ln in lines] == [
        ("system", "init"),
        ("system", "queued"),
        ("system", "api_retry"),
        ("system", "fallback"),
        ("result", None),
    ]
    assert (
        lines[1]["position"] == 2 and lines[2]["error_kind"] == "overloaded" and lines[3]["to_model"] == "b"
    )
    assert all(ln["turn_id"] == "t-1" and ln["session_id"] == "s-1" for ln in lines[1:4])
    assert lines[-1] == {"type": "result", "text": "x", "session_id": "s-1", "turn_id": "t-1", "exit_code": 0}


def test_a_cut_preview_is_no_input_and_a_denial_keeps_its_reason() -> None:
    cut = '{"content": "' + "x" * 190
    lines = _lines(
        [
            {"kind": "text_delta", "data": {"text": "I will "}},
            {"kind": "tool_start", "data": {"id": "tu_1", "name": "write_file", "args_preview": cut}},
            {"kind": "approval", "data": {"approval_id": "ap-1", "tool_name": "write_file", "detail": "d"}},
            {"kind": "tool_end", "data": {"id": "tu_1", "name": "write_file", "error": "permission_denied"}},
        ],
        answers=["n: not there"],
    )
    kinds = [(ln["type"], ln.get("subtype")) for ln in lines]
    assert kinds == [
        ("system", "init"),
        ("stream_event", None),
        ("assistant", None),
        ("assistant", None),
        ("system", "approval_request"),
        ("system", "approval_response"),
        ("user", None),
        ("result", None),
    ]
    assert lines[2]["message"]["content"] == [{"type": "text", "text": "I will "}]
    use = lines[3]
    assert use["message"]["content"][0]["input"] is None and use["input_preview"] == cut
    assert lines[5]["decision"] == "deny" and lines[5]["note"] == "not there"
    assert lines[6]["message"]["content"][0]["is_error"] is True and lines[6]["error"] == "permission_denied"
