"""A transcript line is compact UTF-8 JSON written by pydantic's encoder (issue 34, session 7): it reads back
as the row ``json.dumps`` wrote before (same keys in the same order, same values: text with escapes and
non-ASCII, nested tool inputs, floats), a value JSON lacks is written as text, and a message that cannot be
written (a lone surrogate) leaves the save alone and the file unchanged, as before."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest

from geode.conversation import Message, TextBlock, ToolResultBlock, ToolUseBlock
from geode.sessions.transcript import TranscriptingRecords, TranscriptWriter, exchanges, transcript_path


def _dumps(messages: list[Message]) -> list[dict[str, Any]]:
    return [m.model_dump(mode="json") for m in messages]


def test_lines_read_back_as_the_rows_json_dumps_wrote(tmp_path: Path) -> None:
    messages = [
        Message.user_text('look at ü "quoted" \\ and\ttabs\n☁ 😀'),
        Message(
            role="assistant",
            content=(
                TextBlock(text="Let me look."),
                ToolUseBlock(id="t1", name="read", input={"path": "/a b", "n": [1, 2.5e-05, None, True]}),
            ),
        ),
        Message(
            role="user",
            content=(ToolResultBlock(tool_use_id="t1", content="line\x00\x1f\u2028 é\n" * 50),),
            metadata={"operation_ids": {"t1": "op-1"}, "origin": "tool"},
        ),
    ]
    writer = TranscriptWriter(tmp_path)
    assert writer.append("s-1", 0, _dumps(messages)) == 3
    raw = transcript_path(tmp_path, "s-1").read_bytes()
    lines = raw.splitlines()
    assert len(lines) == 3 and raw.endswith(b"\n")
    for i, (line, m) in enumerate(zip(lines, _dumps(messages), strict=True)):
        row = json.loads(line)
        assert list(row) == ["index", "session_id", "ts", "role", "content", "metadata"]
        assert row["index"] == i and row["session_id"] == "s-1" and isinstance(row["ts"], float)
        assert (row["role"], row["content"], row["metadata"]) == (m["role"], m["content"], m["metadata"])
        assert b'", "' not in line  # compact
    assert "é" in raw.decode("utf-8")  # not \u-escaped
    assert [e.prompt for e in exchanges(transcript_path(tmp_path, "s-1"))] == [messages[0].text]


def test_a_value_json_lacks_is_written_as_text(tmp_path: Path) -> None:
    class Odd:
        def __str__(self) -> str:
            return "odd!"

    TranscriptWriter(tmp_path).append("s-2", 0, [{"role": "user", "content": [], "metadata": {"x": Odd()}}])
    row = json.loads(transcript_path(tmp_path, "s-2").read_bytes())
    assert row["metadata"] == {"x": "odd!"}


class _Save:
    def __init__(self, text: str, base_count: int) -> None:
        self.session_id, self.base_count = "s-3", base_count
        self.new_messages = [{"role": "user", "content": [{"type": "text", "text": text}]}]


class _Store:
    def save_checkpoint(self, save: Any) -> str:
        return "saved"


def test_a_line_that_cannot_be_written_leaves_the_save_and_the_file(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    records = TranscriptingRecords(_Store(), tmp_path)
    assert records.save_checkpoint(_Save("fine", 0)) == "saved"
    before = transcript_path(tmp_path, "s-3").read_bytes()
    with caplog.at_level(logging.WARNING):
        assert records.save_checkpoint(_Save("a\ud800b", 1)) == "saved"
    assert "transcript of s-3 not written" in caplog.text
    assert transcript_path(tmp_path, "s-3").read_bytes() == before
    assert records.save_checkpoint(_Save("next", 1)) == "saved"  # the index not written is written now
    lines = transcript_path(tmp_path, "s-3").read_bytes().splitlines()
    assert [json.loads(x)["index"] for x in lines] == [0, 1]
