"""The executor's side of skills (geode/tools/skill_scope.py, builtin use_skill), in process: a skill in the
GEODE home is readable by the read-only file tools only while the session has it in use (``ctx.skills``),
relative paths resolve from its folder when the workspace has no such file, it is never writable, its
``allowed-tools`` only narrow, and a project's skills load only for a trusted project."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from geode.config_schema import GeodeConfig
from geode.home import GeodeHome
from geode.tools.mcp.trust_bind import trust_project
from tests.skills.skill_folder import INSTRUCTIONS, NAME, REFERENCE, write_broken, write_skill


class _Yes:
    def request(self, ctx, tool_name, detail, safety):  # type: ignore[no-untyped-def]
        return "y"


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> GeodeHome:
    home = GeodeHome(tmp_path / "gh").ensure()
    monkeypatch.setenv("GEODE_HOME", str(home.root))
    write_skill(home.root / "skills")
    write_broken(home.root / "skills")
    plain = home.root / "skills" / "plain"
    plain.mkdir()
    (plain / "SKILL.md").write_text("---\nname: plain\ndescription: No tool list.\n---\nJust notes.\n")
    (plain / "notes.md").write_text("PLAIN-NOTES\n")
    return home


@pytest.fixture
def rig(make_rig, home: GeodeHome):  # type: ignore[no-untyped-def]
    return make_rig(approvals=_Yes())


def _err(res: Any) -> tuple[str, str]:
    assert res.is_error, res.content
    return res.error_type, res.content.get("reason", "")


def test_use_skill_returns_the_instructions_and_files_or_a_clear_error(rig, home: GeodeHome) -> None:  # type: ignore[no-untyped-def]
    out = rig.call("use_skill", {"name": NAME}).content
    assert out["instructions"] == INSTRUCTIONS and out["source"] == "home"
    assert out["folder"] == str((home.root / "skills" / NAME).resolve())
    assert out["files"] == ["SKILL.md", "reference.md", "scripts/fill.sh"]
    assert out["allowed_tools"] == ["glob_files", "grep_files", "read_file", "run_bash", "use_skill"]
    missing = rig.call("use_skill", {"name": "nope"})
    assert (
        missing.error_type == "skill_not_found" and "available: pdf-forms, plain" in missing.content["error"]
    )
    broken = rig.call("use_skill", {"name": "broken"})
    assert "did not load: front matter is not valid YAML" in broken.content["error"], broken.content


def test_a_skill_folder_is_readable_only_while_in_use_and_never_writable(rig, home: GeodeHome) -> None:  # type: ignore[no-untyped-def]
    folder = home.root / "skills" / "plain"
    assert _err(rig.call("read_file", {"file_path": str(folder / "notes.md")})) == (
        "tool_policy_denied",
        "geode_home",
    )
    assert _err(rig.call("read_file", {"file_path": "notes.md"}))[0] == "file_not_found"
    use = {"skills": ("plain",)}
    assert "PLAIN-NOTES" in rig.call("read_file", {"file_path": "notes.md"}, **use).content["content"]
    assert (
        "PLAIN-NOTES"
        in rig.call("read_file", {"file_path": str(folder / "notes.md")}, **use).content["content"]
    )
    listed = rig.call("list_dir", {"path": str(folder)}, **use).content
    assert {e["name"] for e in listed["entries"]} == {"SKILL.md", "notes.md"}
    assert rig.call("grep_files", {"pattern": "PLAIN", "path": str(folder)}, **use).content["matches"]
    # the rest of the home stays out of reach, and the skill's own folder is never writable
    assert _err(rig.call("read_file", {"file_path": str(home.env_file)}, **use))[1] == "geode_home"
    assert _err(rig.call("read_file", {"file_path": "../pdf-forms/reference.md"}, **use))[1] == "geode_home"
    for name, args in (
        ("write_file", {"file_path": str(folder / "notes.md"), "content": "x"}),
        ("edit_file", {"file_path": str(folder / "notes.md"), "old_string": "PLAIN", "new_string": "X"}),
    ):
        assert _err(rig.call(name, args, **use)) == ("tool_policy_denied", "geode_home")
    assert not rig.call("write_file", {"file_path": "notes.md", "content": "x"}, **use).is_error
    assert (folder / "notes.md").read_text() == "PLAIN-NOTES\n"  # a relative write lands in the workspace
    assert (rig.workspace / "notes.md").read_text() == "x"
    # a file of the same name in the workspace wins over the skill's
    (rig.workspace / "notes.md").write_text("WORKSPACE-NOTES\n")
    assert "WORKSPACE-NOTES" in rig.call("read_file", {"file_path": "notes.md"}, **use).content["content"]
    # a name the session never loaded grants nothing
    assert (
        _err(rig.call("read_file", {"file_path": str(folder / "SKILL.md")}, skills=("gone",)))[1]
        == "geode_home"
    )


def test_allowed_tools_only_narrow(rig) -> None:  # type: ignore[no-untyped-def]
    use = {"skills": ("plain", NAME)}
    denied = rig.call("write_file", {"file_path": "w.txt", "content": "w"}, **use)
    assert (
        _err(denied) == ("tool_policy_denied", "skill_allowed_tools")
        and not (rig.workspace / "w.txt").exists()
    )
    assert "read_file" in denied.content["error"]
    assert rig.probes["probe"].calls == [] and _err(rig.call("probe", {}, **use))[1] == "skill_allowed_tools"
    assert rig.probes["probe"].calls == []
    assert REFERENCE in rig.call("read_file", {"file_path": "reference.md"}, **use).content["content"]
    assert not rig.call("use_skill", {"name": "plain"}, **use).is_error
    # without a tool list, a skill narrows nothing
    assert not rig.call("write_file", {"file_path": "w.txt", "content": "w"}, skills=("plain",)).is_error


def test_a_projects_skills_load_only_when_it_is_trusted(make_rig, home: GeodeHome) -> None:  # type: ignore[no-untyped-def]
    untrusted = make_rig(approvals=_Yes())
    proj = untrusted.workspace / ".geode" / "skills" / "proj"
    proj.mkdir(parents=True)
    (proj / "SKILL.md").write_text("---\nname: proj\ndescription: Project notes.\n---\nPROJECT BODY\n")
    assert untrusted.call("use_skill", {"name": "proj"}).error_type == "skill_not_found"
    cfg = GeodeConfig.from_raw({"trust": {"projects": [str(untrusted.workspace)]}})
    listed = make_rig(approvals=_Yes(), config=cfg)  # listed by hand: not bound to the directory
    assert listed.call("use_skill", {"name": "proj"}).error_type == "skill_not_found"
    trust_project(home.config_file, home.root, untrusted.workspace)  # what `geode trust` records
    trusted = make_rig(approvals=_Yes(), config=cfg)
    out = trusted.call("use_skill", {"name": "proj"}).content
    assert out["instructions"] == "PROJECT BODY" and out["source"] == "project"
