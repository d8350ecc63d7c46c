"""A tool round costs the loop what its new messages cost, not the whole history (issue 34): the context
estimate measures each message once per turn, the folds over the history (estimate, compaction records,
skills in use) agree with a fold from the start whatever list they are given."""

from __future__ import annotations

import json
import threading
from types import SimpleNamespace
from typing import Any

from geode.conversation import Message, TextBlock, ToolResultBlock, ToolUseBlock
from geode.loop import compaction
from geode.loop.compaction import estimate_tokens
from geode.loop.skills_in_use import skills_in_use
from geode.loop.summarize import ORIGIN, effective_history
from geode.records.models import CheckpointSave
from geode.sessions import transcript
from tests.loop.conftest import Rig, tool

K = 12


def _measured(monkeypatch: Any) -> list[int]:
    """Every message the estimate JSON-encodes (its size), counted."""
    sizes: list[int] = []

    def dumps(value: Any, **kw: Any) -> str:
        text = json.dumps(value, **kw)
        sizes.append(len(text))
        return text

    monkeypatch.setattr(compaction, "json", SimpleNamespace(dumps=dumps))
    return sizes


def test_a_turn_of_k_rounds_measures_each_message_once(fake_rig: Rig, monkeypatch: Any) -> None:
    """Before: every round measured the whole history twice (the compactor's check, then the view): 338
    encodes for 12 rounds, O(K²). Now each message the calls send once: 2K + 1, whatever K."""
    sizes = _measured(monkeypatch)
    replies = [{"tool_calls": [tool("read", f"r{i}", key=f"k{i}")]} for i in range(K)]
    result = fake_rig.loop(fake_rig.script(*replies, "done")).run_turn("s-work", "turn-1", "read twelve")
    assert result.text == "done"
    history = fake_rig.records.load_checkpoint("s-work")
    assert history is not None and history.state.message_count == 2 * K + 2
    assert len(sizes) <= 2 * K + 1  # the final answer is never measured: no call follows it


def _round(i: int, *, skill: str = "", failed: bool = False) -> list[Message]:
    name, args = ("use_skill", {"name": skill}) if skill else ("read", {"key": str(i)})
    call = ToolUseBlock(id=f"c{i}", name=name, input=args)
    result = ToolResultBlock(tool_use_id=f"c{i}", content="x" * (i * 7), is_error=failed)
    return [Message(role="assistant", content=(call,)), Message(role="user", content=(result,))]


def _scratch_tokens(messages: list[Message]) -> int:
    chars = sum(len(json.dumps([b.model_dump() for b in m.content], ensure_ascii=False)) for m in messages)
    return chars // compaction.CHARS_PER_TOKEN + 1


def test_the_folds_agree_with_a_fold_from_the_start_whatever_the_list() -> None:
    """Grown, shortened (a popped proposal), replaced, changed in the middle (a compacted view) or mixed:
    the same answers as the plain scan of the list given."""
    record = Message(
        role="user",
        content=(TextBlock(text="summary"),),
        metadata={"origin": ORIGIN, "covers": 3, "compaction_id": "c"},
    )
    h: list[Message] = [Message.user_text("go"), *_round(1, skill="pdf"), *_round(2)]
    seen = [list(h)]
    h += _round(3, skill="csv")
    seen.append(list(h))
    seen.append(h[:-1])  # the last message popped (a save that failed)
    h += [record, *_round(4, skill="pdf"), *_round(5, skill="xls", failed=True)]
    changed = h[4].model_copy(update={"content": (ToolResultBlock(tool_use_id="c2", content="[elided]"),)})
    seen += [list(h), [h[0], *h[5:]], list(h), h[2:], [*h[:4], changed, *h[5:]], list(h)]
    for messages in seen:
        assert estimate_tokens(messages) == _scratch_tokens(messages)
    assert skills_in_use(h) == ("csv", "pdf")
    assert skills_in_use(h[:3]) == ("pdf",)
    assert skills_in_use(h[:2]) == ()
    view = effective_history(h)
    assert view[0].content[0] == TextBlock(text="summary") and view[1:] == h[3:7] + h[8:]
    assert effective_history(h[:7]) == h[:7]


def test_a_round_s_view_of_a_history_that_fits_is_not_a_copy_of_it() -> None:
    """No record, within the budget: the model's view is the history itself (the request takes its own tuple);
    each of effective_history and model_view copied the whole list every round before."""
    h = [*_round(1), *_round(2, skill="csv")]
    assert effective_history(h) is h
    assert compaction.model_view(h, budget_tokens=10**6) is h
    assert compaction.model_view(h, budget_tokens=10**6, keep_recent=2) == h


def _loads(rig: Rig) -> list[tuple[int, int]]:
    """(from_index, messages read) of every restore from the store."""
    seen: list[tuple[int, int]] = []
    inner = rig.records.load_checkpoint

    def load(session_id: str, from_index: int = 0) -> Any:
        restored = inner(session_id, from_index) if from_index else inner(session_id)
        seen.append((from_index, len(restored.messages) if restored is not None else 0))
        return restored

    rig.records.load_checkpoint = load  # type: ignore[method-assign]
    return seen


def test_the_next_turn_reads_no_message_of_the_history_this_process_saved(fake_rig: Rig) -> None:
    """Before: every turn read and validated the whole session from the store (O(session) per turn). Now a
    turn after this process's own last save reads only the state record (a new session's second turn still
    reads it all: its creation time is learnt then); since issue 34 session 4 such a turn reads nothing at
    all (its open save is the fence). Another writer in between (here: a save of the store's own, as the
    other worker would) makes the open save refused and the turn read the whole history again."""
    loads = _loads(fake_rig)
    replies = [{"tool_calls": [tool("read", "a", key="1")]}, "one", "two", "three", "four"]
    model = fake_rig.script(*replies)
    loop = fake_rig.loop(model)
    assert loop.run_turn("s-kept", "turn-1", "first").text == "one"
    assert loop.run_turn("s-kept", "turn-2", "second").text == "two"
    assert loads == [(0, 0), (0, 4)]
    assert loop.run_turn("s-kept", "turn-3", "third").text == "three"
    assert loads == [(0, 0), (0, 4)]  # no store read at all: its last save was this process's
    state = fake_rig.records.load_checkpoint("s-kept").state
    loads.clear()
    other = Message.user_text("written by the other worker").model_dump(mode="json")
    save = CheckpointSave(
        session_id="s-kept", seq=state.seq + 1, base_count=state.message_count, new_messages=[other]
    )
    fake_rig.records.save_checkpoint(save)
    assert loop.run_turn("s-kept", "turn-4", "fourth").text == "four"
    assert loads == [(0, 9)]  # the open save refused (the seq moved): the whole history, the other's in it
    history = fake_rig.records.load_checkpoint("s-kept")
    texts = [Message.model_validate(m).text for m in history.messages]
    assert texts[-4:] == ["three", "written by the other worker", "fourth", "four"]
    assert [m.text for m in model.requests[-1].messages][-3:] == [
        "three",
        "written by the other worker",
        "fourth",
    ]


def test_a_turns_rounds_reuse_their_threads(fake_rig: Rig, monkeypatch: Any) -> None:
    """Before: a new thread per model call and per tool batch (2K for K rounds, Thread.start was a share of
    the loop's CPU). Now the threads of the first round wait for the next one: at most one of each kind
    is started for the turn, and parallel calls still run at once and answer in order."""
    started: list[str] = []
    real_start = threading.Thread.start

    def start(self: threading.Thread) -> None:
        started.append(self.name)
        real_start(self)

    monkeypatch.setattr(threading.Thread, "start", start)
    replies: list[Any] = [{"tool_calls": [tool("read", f"r{i}", key=f"k{i}")]} for i in range(K)]
    replies.append({"tool_calls": [tool("read", f"p{i}", key=f"p{i}") for i in range(3)]})
    result = fake_rig.loop(fake_rig.script(*replies, "done")).run_turn("s-threads", "turn-1", "read")
    assert result.text == "done"
    assert len(started) <= 4, started  # a model-call thread, and up to 3 for the parallel batch
    history = fake_rig.records.load_checkpoint("s-threads")
    last = Message.model_validate(history.messages[-2])
    assert [b.tool_use_id for b in last.tool_results] == ["p0", "p1", "p2"]


def test_the_transcript_tail_is_read_only_when_another_process_appended(
    tmp_path: Any, monkeypatch: Any
) -> None:
    """Before: every checkpoint save read the last 64 KiB of the session's transcript to find its last
    index. Now only the first save, and a save after another writer appended (the file's size moved)."""
    reads: list[int] = []
    real = transcript._last_index

    def counted(path: Any) -> int:
        reads.append(1)
        return real(path)

    monkeypatch.setattr(transcript, "_last_index", counted)
    writer = transcript.TranscriptWriter(tmp_path)
    rows = [Message.user_text(f"m{i}").model_dump(mode="json") for i in range(12)]
    for i in range(0, 8, 2):
        assert writer.append("s-t", i, rows[i : i + 2]) == 2
    assert len(reads) == 1
    other = transcript.TranscriptWriter(tmp_path)  # the other loop worker
    assert other.append("s-t", 8, rows[8:10]) == 2
    assert writer.append("s-t", 8, rows[8:12]) == 2  # it reads the tail again: 8 and 9 are not doubled
    assert len(reads) == 3
    lines = (tmp_path / "transcripts" / "s-t.jsonl").read_text().splitlines()
    assert [json.loads(x)["index"] for x in lines] == list(range(12))


def test_the_prompt_sources_are_read_again_only_when_they_changed(tmp_path: Any, monkeypatch: Any) -> None:
    """Before: every call of a turn read and parsed GEODE.md and the rules again. Now a file is read when
    its inode, mtime or size changed: an edit between two rounds is in the next call's prompt."""
    from pathlib import Path

    from geode.prompt import PromptSources, build_system_prompt

    reads: list[str] = []
    real = Path.read_text

    def counted(self: Path, *a: Any, **kw: Any) -> str:
        reads.append(self.name)
        return real(self, *a, **kw)

    monkeypatch.setattr(Path, "read_text", counted)
    md = tmp_path / "GEODE.md"
    md.write_text("## Project\nfirst guidance\n")
    src = PromptSources(workspace=tmp_path)
    texts = [build_system_prompt(src, model="m")[0].text for _ in range(5)]
    assert reads.count("GEODE.md") <= 2 and all("first guidance" in t for t in texts)  # the default + ours
    md.write_text("## Project\nsecond guidance, longer\n")
    assert "second guidance" in build_system_prompt(src, model="m")[0].text
