"""Finding the skills a session may use: ``$GEODE_HOME/skills/<folder>/SKILL.md``, then
``<workspace>/.geode/skills/<folder>/SKILL.md`` when the workspace is a trusted project (``geode trust``;
``[trust] projects``). A project's skill replaces a home skill of the same name. Folders that fail to parse
are kept as failures with their one-line reason (``geode skills`` shows them); symlinked folders are not
followed (a skill folder becomes a read-only root while in use: it must be the folder it looks like)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from geode.hooks.dialect import FROM_CLAUDE
from geode.skills.parse import Skill, SkillError, parse_skill
from geode.tools.mcp.trust import is_trusted

MAX_SKILLS = 100  # per skills folder
MAX_FILES = 200  # listed per skill
# Claude Code's tool names in ``allowed-tools`` → GEODE's (a name already GEODE's is kept as it is)
CLAUDE_NAMES = {**FROM_CLAUDE, "LS": "list_dir", "MultiEdit": "edit_file", "Task": "delegate_task"}


@dataclass(frozen=True)
class SkillFailure:
    folder: Path
    source: str
    reason: str


@dataclass(frozen=True)
class SkillCatalogue:
    """The usable skills (by name, sorted), the folders that failed and notes (an untrusted project's)."""

    skills: tuple[Skill, ...] = ()
    failures: tuple[SkillFailure, ...] = ()
    notes: tuple[str, ...] = ()

    def get(self, name: str) -> Skill | None:
        return next((s for s in self.skills if s.name == name), None)


def geode_tool_names(allowed: Sequence[str]) -> frozenset[str]:
    """``allowed-tools`` as GEODE tool names: ``Bash(python:*)`` counts as run_bash (the narrowing is per
    tool; a command pattern is not enforced), Claude Code names are mapped, others kept."""
    out = set()
    for raw in allowed:
        base = raw.split("(", 1)[0].strip()
        out.add(CLAUDE_NAMES.get(base, base))
    return frozenset(out)


def home_skills_dir(home_root: Path) -> Path:
    return home_root / "skills"


def project_skills_dir(workspace: Path) -> Path:
    return workspace / ".geode" / "skills"


def _scan(root: Path, source: str) -> tuple[list[Skill], list[SkillFailure]]:
    skills: list[Skill] = []
    failures: list[SkillFailure] = []
    try:
        entries = sorted(os.scandir(root), key=lambda e: e.name)
    except (FileNotFoundError, NotADirectoryError):
        return skills, failures
    except OSError as exc:
        return skills, [SkillFailure(root, source, f"cannot list: {exc.strerror or exc}")]
    seen: dict[str, Path] = {}
    for entry in entries:
        folder = Path(entry.path)
        if entry.name.startswith("."):
            continue
        if entry.is_symlink():
            failures.append(
                SkillFailure(folder, source, "is a symbolic link; skill folders are not followed")
            )
            continue
        if not entry.is_dir(follow_symlinks=False):
            continue
        if len(skills) >= MAX_SKILLS:
            failures.append(SkillFailure(folder, source, f"more than {MAX_SKILLS} skills in {root}"))
            continue
        try:
            skill = parse_skill(folder, source)
        except SkillError as exc:
            failures.append(SkillFailure(folder, source, exc.reason))
            continue
        if skill.name in seen:
            failures.append(
                SkillFailure(folder, source, f"name {skill.name!r} is already used by {seen[skill.name]}")
            )
            continue
        seen[skill.name] = folder
        skills.append(skill)
    return skills, failures


def discover(home_root: Path | None, workspace: Path | None, trusted: Sequence[str]) -> SkillCatalogue:
    """The skills of the home and, for a trusted project workspace, of the project."""
    by_name: dict[str, Skill] = {}
    failures: list[SkillFailure] = []
    notes: list[str] = []
    home_dir = home_skills_dir(home_root).resolve() if home_root is not None else None
    if home_dir is not None:
        found, bad = _scan(home_dir, "home")
        by_name.update((s.name, s) for s in found)
        failures += bad
    if workspace is not None:
        proj = project_skills_dir(workspace)
        if proj.is_dir() and proj.resolve() != home_dir:
            if is_trusted(workspace, trusted):
                found, bad = _scan(proj.resolve(), "project")
                for s in found:
                    if s.name in by_name:
                        notes.append(f"project skill {s.name!r} replaces the home skill of that name")
                    by_name[s.name] = s
                failures += bad
            else:
                notes.append(
                    f"skills in {proj} are not loaded: {workspace} is not a trusted project (geode trust)"
                )
    skills = tuple(by_name[k] for k in sorted(by_name))
    return SkillCatalogue(skills, tuple(failures), tuple(notes))


def skill_files(skill: Skill) -> list[str]:
    """The skill's files relative to its folder (regular files; symlinks and hidden entries left out)."""
    out: list[str] = []
    for dirpath, dirnames, filenames in os.walk(skill.folder, followlinks=False):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for name in sorted(filenames):
            path = Path(dirpath) / name
            if name.startswith(".") or path.is_symlink() or not path.is_file():
                continue
            out.append(str(path.relative_to(skill.folder)))
            if len(out) >= MAX_FILES:
                return out
    return out
