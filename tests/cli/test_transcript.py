"""Session transcripts: one JSONL line per message written once, 0600, read back as exchanges."""

from __future__ import annotations

import json
import stat

from geode.conversation import Message, TextBlock, ToolResultBlock, ToolUseBlock
from geode.records.models import CheckpointSave
from geode.sessions.transcript import (
    TranscriptingRecords,
    first_prompt,
    hook_transcript_path,
    last_exchanges,
    transcript_path,
)


class _Store:
    def __init__(self) -> None:
        self.saved: list[CheckpointSave] = []

    def save_checkpoint(self, save: CheckpointSave) -> str:
        self.saved.append(save)
        return "ok"

    def list_sessions(self) -> list[str]:
        return ["passed through"]


def _dump(*msgs: Message) -> list[dict]:
    return [m.model_dump(mode="json") for m in msgs]


def _prompt(text: str) -> Message:
    return Message(role="user", content=(TextBlock(text=text),), metadata={"origin": "user_input"})


def test_saves_append_each_message_once_and_read_back_as_exchanges(tmp_path):
    rec = TranscriptingRecords(_Store(), tmp_path)
    turn1 = _dump(
        _prompt("read a"),
        Message(role="assistant", content=(ToolUseBlock(id="u1", name="read_file", input={}),)),
        Message(role="user", content=(ToolResultBlock(tool_use_id="u1", content="{}"),)),
        Message.model_validate({"role": "assistant", "content": [{"type": "text", "text": "a is empty"}]}),
    )
    assert rec.save_checkpoint(CheckpointSave(session_id="s-1", seq=1, base_count=0, new_messages=turn1[:1]))
    rec.save_checkpoint(CheckpointSave(session_id="s-1", seq=2, base_count=0, new_messages=turn1[:3]))
    rec.save_checkpoint(CheckpointSave(session_id="s-1", seq=3, base_count=3, new_messages=turn1[3:]))
    second = _dump(_prompt("b?"))
    rec.save_checkpoint(CheckpointSave(session_id="s-1", seq=4, base_count=4, new_messages=second))
    path = transcript_path(tmp_path, "s-1")
    rows = [json.loads(x) for x in path.read_text().splitlines()]
    assert [r["index"] for r in rows] == [0, 1, 2, 3, 4]
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    ex = last_exchanges(tmp_path, "s-1", 5)
    got = [(e.prompt, e.answer, e.tools) for e in ex]
    assert got == [("read a", "a is empty", ("read_file",)), ("b?", "", ())]
    assert first_prompt(tmp_path, "s-1") == "read a"
    assert rec.list_sessions() == ["passed through"]


def test_hooks_get_an_existing_private_file_and_odd_ids_stay_inside(tmp_path):
    p = hook_transcript_path("s-new", tmp_path)
    assert p is not None and stat.S_IMODE((tmp_path / "transcripts" / "s-new.jsonl").stat().st_mode) == 0o600
    assert hook_transcript_path("", tmp_path) is None
    assert hook_transcript_path("s-new", tmp_path / "no-home") is None
    assert not (tmp_path / "no-home").exists()
    odd = transcript_path(tmp_path, "../../etc/passwd")
    assert odd.parent == tmp_path / "transcripts" and ".." not in odd.name
