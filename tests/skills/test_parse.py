"""SKILL.md parsing and discovery (geode/skills/): a Claude-Code-shaped skill parses as written; each bad
folder is kept with a one-line reason; YAML goes through safe_load (a Python tag is refused); symlinked
folders are not followed; a project's skills count only when it is trusted; the skills a session has in use
come from its history; names and descriptions (never bodies) make the prompt's block."""

from __future__ import annotations

from pathlib import Path

import pytest

from geode.conversation import Message, TextBlock, ToolResultBlock, ToolUseBlock
from geode.loop.skills_in_use import skills_in_use
from geode.prompt.builder import build_system_prompt, system_text
from geode.prompt.sources import PromptSources
from geode.skills.catalogue import discover, geode_tool_names
from geode.skills.parse import SkillError, parse_skill, tool_list
from geode.skills.prompt_block import skill_cards
from geode.tools.mcp.trust_bind import trust_project
from tests.skills.skill_folder import DESCRIPTION, INSTRUCTIONS, NAME, write_skill


def _skill(root: Path, folder: str, text: str) -> Path:
    (root / folder).mkdir(parents=True, exist_ok=True)
    (root / folder / "SKILL.md").write_text(text)
    return root / folder


def test_a_claude_code_shaped_skill_parses_as_written(tmp_path: Path) -> None:
    s = parse_skill(write_skill(tmp_path), "home")
    assert (s.name, s.description, s.body, s.license) == (NAME, DESCRIPTION, INSTRUCTIONS, "Apache-2.0")
    assert s.allowed_tools == ("Read", "Grep", "Glob", "Bash(bash scripts/fill.sh:*)")
    assert s.metadata == {"version": "1.2"}
    assert geode_tool_names(s.allowed_tools) == {"read_file", "grep_files", "glob_files", "run_bash"}
    assert tool_list(["Read", "Write"]) == ("Read", "Write") and tool_list("Read Grep") == ("Read", "Grep")
    crlf = _skill(
        tmp_path, "crlf", "\ufeff---\r\nname: crlf\r\ndescription: Saved on Windows.\r\n---\r\nBody\r\n"
    )
    assert (parse_skill(crlf, "home").description, parse_skill(crlf, "home").body) == (
        "Saved on Windows.",
        "Body",
    )


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("no front matter\n", "does not start with YAML front matter"),
        ("---\nname: x\n", "does not start with YAML front matter"),
        ("---\nname: [x\n---\n", "front matter is not valid YAML (line 3)"),
        ("---\n- a\n---\n", "front matter is not a mapping"),
        ("---\nname: x\n---\n", "front matter has no 'description'"),
        ("---\ndescription: d\n---\n", "front matter has no 'name'"),
        (
            "---\nname: Bad_Name\ndescription: d\n---\n",
            "must be lowercase letters, digits and single hyphens",
        ),
        ("---\nname: x\ndescription: d\nallowed-tools: 3\n---\n", "allowed-tools must be a list or a string"),
        ("---\nname: x\ndescription: d\nmetadata: [1]\n---\n", "'metadata' must be a mapping"),
        ("---\nname: !!python/object/apply:os.system ['true']\ndescription: d\n---\n", "not valid YAML"),
    ],
)
def test_a_bad_skill_md_is_one_line_saying_why(tmp_path: Path, text: str, reason: str) -> None:
    with pytest.raises(SkillError) as err:
        parse_skill(_skill(tmp_path, "s", text), "home")
    assert reason in err.value.reason and "\n" not in str(err.value), str(err.value)


def test_discovery_keeps_failures_skips_symlinks_and_trusts_only_listed_projects(tmp_path: Path) -> None:
    home, ws = tmp_path / "gh", tmp_path / "ws"
    write_skill(home / "skills")
    _skill(home / "skills", "zz-dup", f"---\nname: {NAME}\ndescription: again\n---\n")
    _skill(home / "skills", "no-md-here", "x").joinpath("SKILL.md").unlink()
    (home / "skills" / "linked").symlink_to(home / "skills" / NAME)
    _skill(ws / ".geode" / "skills", "p", f"---\nname: {NAME}\ndescription: project version\n---\nP\n")
    cat = discover(home, ws, [])
    assert [s.name for s in cat.skills] == [NAME] and cat.skills[0].source == "home"
    reasons = {f.folder.name: f.reason for f in cat.failures}
    assert (
        reasons["zz-dup"].startswith(f"name '{NAME}' is already") and reasons["no-md-here"] == "no SKILL.md"
    )
    assert "symbolic link" in reasons["linked"]
    assert cat.notes and "not a trusted project" in cat.notes[0]
    listed = discover(home, ws, [str(ws)])  # listed by hand: not bound to the directory, as for MCP servers
    assert listed.get(NAME).source == "home" and "is not bound to a directory" in listed.notes[0]  # type: ignore[union-attr]
    trust_project(home / "config.toml", home, ws)
    trusted = discover(home, ws, [str(ws)])
    assert trusted.get(NAME).source == "project" and trusted.get(NAME).description == "project version"  # type: ignore[union-attr]
    assert "replaces the home skill" in trusted.notes[0]
    ws.chmod(0o777)  # others could now write its skills: trust dropped, as for its MCP servers
    try:
        dropped = discover(home, ws, [str(ws)])
    finally:
        ws.chmod(0o755)
    assert dropped.get(NAME).source == "home" and "trust dropped" in dropped.notes[0]  # type: ignore[union-attr]


def _use(tu_id: str, name: str) -> Message:
    return Message(
        role="assistant", content=(ToolUseBlock(id=tu_id, name="use_skill", input={"name": name}),)
    )


def _result(tu_id: str, error: bool = False) -> Message:
    return Message(role="user", content=(ToolResultBlock(tool_use_id=tu_id, content="{}", is_error=error),))


def test_skills_in_use_are_the_successful_use_skill_calls_the_last_used_at_the_end() -> None:
    history = [
        Message(role="user", content=(TextBlock(text="hi"),)),
        _use("a", "one"),
        _result("a"),
        _use("b", "two"),
        _result("b"),
        _use("c", "missing"),
        _result("c", error=True),
        _use("d", "one"),
        _result("d"),
        _use("e", "pending"),
    ]
    assert skills_in_use(history) == ("two", "one")
    assert skills_in_use([]) == ()


def test_the_prompt_block_names_and_describes_skills_without_their_bodies(tmp_path: Path) -> None:
    write_skill(tmp_path / "skills")
    cards = skill_cards(tmp_path, None, [])
    assert cards == [(NAME, DESCRIPTION)]
    text = system_text(build_system_prompt(PromptSources(skills=cards)))
    assert "<available_skills>" in text and f"<name>{NAME}</name>" in text and DESCRIPTION in text
    assert INSTRUCTIONS not in text and "use_skill" in text
    assert "<available_skills>" not in system_text(build_system_prompt(PromptSources()))


def test_an_edited_skill_md_is_read_again(tmp_path: Path) -> None:
    folder = write_skill(tmp_path / "skills")
    assert discover(tmp_path, None, []).skills[0].description == DESCRIPTION
    text = (folder / "SKILL.md").read_text()
    (folder / "SKILL.md").write_text(text.replace(DESCRIPTION, "Edited description, longer than before."))
    assert discover(tmp_path, None, []).skills[0].description == "Edited description, longer than before."
    (folder / "SKILL.md").write_text("---\nname: pdf-forms\n---\n")
    [failed] = discover(tmp_path, None, []).failures
    assert "no 'description'" in failed.reason


def test_geode_doctor_warns_of_a_skill_folder_that_failed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from actors.cli.doctor import run_checks
    from geode.home import GeodeHome

    home = GeodeHome(tmp_path / "gh").ensure()
    write_skill(home.root / "skills")
    _skill(home.root / "skills", "bad", "---\nname: bad\n---\n")
    monkeypatch.chdir(tmp_path)
    [warned] = [c for c in run_checks(home) if c["name"] == "skills"]
    assert warned["warn"] and "/skills/bad: front matter has no 'description'" in warned["detail"], warned
