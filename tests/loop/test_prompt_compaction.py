"""System prompt sources (GEODE.md sections, rules overriding by name) and bounded compaction."""

from __future__ import annotations

from pathlib import Path

from geode.conversation import Message, TextBlock, ToolResultBlock, ToolUseBlock
from geode.loop.compaction import estimate_tokens, model_view, unanswered_tool_uses, units
from geode.prompt import PromptSources, build_system_prompt


def test_project_geode_md_overrides_sections_and_rules_override_by_name(tmp_path: Path) -> None:
    home_rules, ws = tmp_path / "home_rules", tmp_path / "ws"
    (ws / ".geode" / "rules").mkdir(parents=True)
    home_rules.mkdir()
    (ws / ".geode" / "GEODE.md").write_text("## Voice & Conduct\nSpeak like a pirate.\n\n## Extra\nMore.\n")
    (home_rules / "a.md").write_text("home rule A")
    (home_rules / "b.md").write_text("home rule B")
    (ws / ".geode" / "rules" / "b.md").write_text("project rule B")
    sections = build_system_prompt(
        PromptSources(workspace=ws, home_rules=home_rules, directives=["be brief"]),
        model="m",
        provider="p",
        hints={"verification_continuation": "fix it"},
    )
    names = [s.name for s in sections]
    assert names == ["agent_identity", "runtime_rules", "tool_contract", "dynamic_context"]
    ident = sections[0].text
    assert "Speak like a pirate." in ident and "## Identity" in ident and "## Extra" in ident
    assert "Be direct and brief" not in ident  # the default section was replaced by the project's
    rules = sections[1].text
    assert "home rule A" in rules and "project rule B" in rules and "home rule B" not in rules
    assert [s.cache_boundary for s in sections] == [False, False, True, False]
    dyn = sections[-1].text
    assert "be brief" in dyn and "fix it" in dyn and "model: m" in dyn


def _pair(i: int, size: int) -> list[Message]:
    use = Message(role="assistant", content=(ToolUseBlock(id=f"t{i}", name="read", input={"i": i}),))
    res = Message(role="user", content=(ToolResultBlock(tool_use_id=f"t{i}", content="x" * size),))
    return [use, res]


def test_compaction_keeps_pairs_and_the_current_turn() -> None:
    history = [Message.user_text("old question")]
    for i in range(30):
        history += _pair(i, 4000)
    history.append(Message(role="assistant", content=(TextBlock(text="old answer"),)))
    history.append(Message.user_text("current question"))
    history += _pair(99, 100)
    assert model_view(history, budget_tokens=10**6) == history
    view = model_view(history, budget_tokens=3000, keep_recent=4)
    assert estimate_tokens(view) <= 3000
    assert unanswered_tool_uses(view) == []
    assert view[0].role == "user" and "[system:compaction]" in view[0].text
    assert any(m.text == "current question" for m in view)
    assert view[-1].tool_results[0].tool_use_id == "t99"
    for group in units(view):  # every tool_use still sits right before its results
        if group[0].tool_uses:
            assert len(group) == 2


def test_compaction_elides_old_results_before_dropping() -> None:
    history = [Message.user_text("q"), *_pair(1, 20_000), *_pair(2, 10)]
    view = model_view(history, budget_tokens=2000, keep_recent=2)
    assert len(view) == len(history)
    assert "chars elided" in view[2].tool_results[0].content
