"""A turn end to end: tool_use → executed → tool_result → final text; order; write-ahead checkpoints."""

from __future__ import annotations

import itertools

from geode.conversation import Message
from geode.loop.compaction import unanswered_tool_uses
from geode.protocol.turns import TerminationReason
from tests.loop.conftest import Rig, tool


def test_tool_use_then_final_text(rig: Rig) -> None:
    provider = rig.script({"tool_calls": [tool("write", "t1", text="hello")]}, "done: wrote hello")
    result = rig.loop(provider).run_turn("s1", "turn-1", "write hello")
    assert result.termination_reason == TerminationReason.NATURAL
    assert result.text == "done: wrote hello"
    assert result.tool_calls == 1 and result.rounds == 2
    assert rig.effects == ["hello"]
    # the second model call saw the tool_result of the first call
    second = provider.requests[1]
    last = second.messages[-1]
    assert last.role == "user" and last.tool_results[0].tool_use_id == "t1"
    assert '"written": "hello"' in last.tool_results[0].content
    restored = rig.records.load_checkpoint("s1")
    msgs = [Message.model_validate(m) for m in restored.messages]
    assert [m.role for m in msgs] == ["user", "assistant", "user", "assistant"]
    assert unanswered_tool_uses(msgs) == []
    assert restored.state.pending_batch is None
    assert restored.state.meta["done_turn"] == "turn-1"


def test_parallel_calls_keep_their_order(rig: Rig) -> None:
    calls = [tool("read", f"c{i}", key=str(i)) for i in range(6)]
    provider = rig.script({"tool_calls": calls}, "ok")
    result = rig.loop(provider).run_turn("s2", "turn-1", "read six")
    assert result.termination_reason == TerminationReason.NATURAL
    results = provider.requests[1].messages[-1].tool_results
    assert [r.tool_use_id for r in results] == [f"c{i}" for i in range(6)]
    assert [r.content for r in results] == [f'{{"value": "read:{i}"}}' for i in range(6)]


def test_pending_batch_saved_before_any_tool_runs(rig: Rig) -> None:
    seen: list[object] = []
    inner = rig.handlers["write"]

    def spy(args):
        seen.append(rig.records.load_checkpoint("s3").state.pending_batch)
        return inner(args)

    rig.handlers["write"] = spy
    provider = rig.script({"tool_calls": [tool("write", "w1", text="x")]}, "fine")
    rig.loop(provider).run_turn("s3", "turn-1", "go")
    assert seen and seen[0] is not None
    op = seen[0].operations[0]
    assert op.tool_use_id == "w1" and op.operation_id.startswith("op-")
    # saves are incremental: each save sends only the messages added since the previous one
    bases = [(s.base_count, len(s.new_messages)) for s in rig.records.saves]
    for (b1, n1), (b2, _) in itertools.pairwise(bases):
        assert b2 == b1 + n1


def test_checkpoint_store_failing_means_no_tool_runs(rig: Rig) -> None:
    rig.records.fail_pending = True
    provider = rig.script({"tool_calls": [tool("write", "w1", text="must-not-happen")]}, "never")
    result = rig.loop(provider).run_turn("s4", "turn-1", "write")
    assert result.termination_reason == TerminationReason.CHECKPOINT_UNAVAILABLE
    assert rig.effects == []
    assert rig.executor.calls == []
    assert len(provider.requests) == 1


def test_events_are_ordered_and_cover_the_turn(rig: Rig) -> None:
    provider = rig.script({"tool_calls": [tool("read", "r1", key="a")]}, "answer text")
    rig.loop(provider).run_turn("s5", "turn-1", "q")
    seqs = [e.seq for e in rig.sink.events]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
    kinds = rig.sink.kinds()
    for k in (
        "round_start",
        "tool_start",
        "tool_end",
        "tokens",
        "checkpoint_saved",
        "text_delta",
        "termination",
    ):
        assert k in kinds
    assert kinds[-1] == "termination"
    start = next(e for e in rig.sink.events if e.kind == "tool_start")
    assert start.data["id"] == "r1" and start.data["name"] == "read"


def test_second_turn_continues_the_session(rig: Rig) -> None:
    loop = rig.loop(rig.script("first answer", "second answer"))
    loop.run_turn("s6", "turn-1", "one")
    result = loop.run_turn("s6", "turn-2", "two")
    assert result.text == "second answer"
    req = loop.provider.requests[1]
    assert [m.text for m in req.messages] == ["one", "first answer", "two"]
    # the same turn id again returns the recorded result without calling the model
    again = loop.run_turn("s6", "turn-2", "two")
    assert again.text == "second answer" and len(loop.provider.requests) == 2


def test_system_prompt_travels_separately(rig: Rig) -> None:
    (rig.tmp / "GEODE.md").write_text("## Identity\nProject identity here.\n")
    rules = rig.tmp / ".geode" / "rules"
    rules.mkdir(parents=True)
    (rules / "style.md").write_text("Always be terse.")
    provider = rig.script("hi")
    rig.loop(provider).run_turn("s7", "turn-1", "hello")
    req = provider.requests[0]
    text = "\n".join(s.text for s in req.system)
    assert "Project identity here." in text and "Always be terse." in text
    assert sum(s.cache_boundary for s in req.system) == 1
    assert all("Project identity" not in m.text for m in req.messages)


def test_executor_down_does_not_stop_a_text_turn(rig: Rig) -> None:
    class Down:
        def bind_plan(self, plan):
            raise ConnectionError("executor unavailable")

        def execute(self, ctx, call):
            raise ConnectionError("executor unavailable")

    loop = rig.loop(rig.script("just text", {"tool_calls": [tool("write", "w", text="x")]}, "reported"))
    loop.executor = Down()
    assert loop.run_turn("s9", "turn-1", "hi").text == "just text"
    result = loop.run_turn("s9", "turn-2", "write")
    assert result.termination_reason == TerminationReason.NATURAL and rig.effects == []
    last = loop.provider.requests[-1].messages[-1].tool_results[0]
    assert last.is_error and "executor_error" in last.content
