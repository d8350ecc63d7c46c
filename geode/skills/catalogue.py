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
from geode.protocol.errors import ConfigError
from geode.skills.parse import SKILL_FILE, Skill, SkillError, parse_skill
from geode.tools.mcp.trust import trusted_projects
from geode.tools.mcp.trust_check import TrustDropped, open_trusted
from geode.tools.mcp.trust_store import load_store

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


_PARSED: dict[tuple[str, str], tuple[tuple[int, int, int], Skill | SkillError]] = {}
MAX_PARSED = 512


def _parsed(folder: Path, source: str) -> Skill:
    """``parse_skill``, remembered while its SKILL.md keeps its inode, size and mtime (the executor looks the
    skills in use up on every call; the loop worker on every turn)."""
    try:
        st = os.stat(folder / SKILL_FILE)
        stamp = (st.st_ino, st.st_size, st.st_mtime_ns)
    except OSError:
        return parse_skill(folder, source)  # its own one-line error
    key = (str(folder), source)
    hit = _PARSED.get(key)
    if hit is not None and hit[0] == stamp:
        if isinstance(hit[1], SkillError):
            raise hit[1]
        return hit[1]
    try:
        out: Skill | SkillError = parse_skill(folder, source)
    except SkillError as exc:
        out = exc
    if len(_PARSED) >= MAX_PARSED:
        _PARSED.clear()
    _PARSED[key] = (stamp, out)
    if isinstance(out, SkillError):
        raise out
    return out


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
            skill = _parsed(folder, source)
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


def project_distrust(workspace: Path, trusted: Sequence[str], home_root: Path | None) -> str | None:
    """None when ``workspace`` is a trusted project whose trust still holds as for its MCP servers (listed in
    ``[trust] projects``, bound by `geode trust` and still that directory, owned by us, not group/world-
    writable: ``trust_check.open_trusted``); else why not, in one line."""
    real = workspace.expanduser().resolve()
    projects, _notes = trusted_projects(trusted)
    if real not in projects:
        return f"{workspace} is not a trusted project (geode trust)"
    if home_root is None:
        return "no GEODE home to check the trust binding in"
    try:
        binding = load_store(home_root).projects.get(str(real))
    except ConfigError as exc:
        return exc.message
    if binding is None:
        return f"the trust of {real} is not bound to a directory: run `geode trust {real}`"
    try:
        os.close(open_trusted(real, binding))
    except TrustDropped as exc:
        return f"trust dropped: {exc.message}; run `geode trust {real}` again if you trust it as it is now"
    return None


def _home_dir(home_root: Path) -> Path:
    """The home's skills folder, resolved; one ``stat`` and not resolved when it is not there (no skill
    installed: what it resolves to would not exist either, so it is listed as empty the same way)."""
    folder = home_skills_dir(home_root)
    try:
        os.stat(folder)
    except FileNotFoundError:
        return folder
    except OSError:
        pass
    return folder.resolve()


def discover(home_root: Path | None, workspace: Path | None, trusted: Sequence[str]) -> SkillCatalogue:
    """The skills of the home and, for a trusted project workspace, of the project."""
    by_name: dict[str, Skill] = {}
    failures: list[SkillFailure] = []
    notes: list[str] = []
    home_dir = _home_dir(home_root) if home_root is not None else None
    if home_dir is not None:
        found, bad = _scan(home_dir, "home")
        by_name.update((s.name, s) for s in found)
        failures += bad
    if workspace is not None:
        proj = project_skills_dir(workspace)
        if proj.is_dir() and proj.resolve() != home_dir:
            why_not = project_distrust(workspace, trusted, home_root)
            if why_not is None:
                found, bad = _scan(proj.resolve(), "project")
                for s in found:
                    if s.name in by_name:
                        notes.append(f"project skill {s.name!r} replaces the home skill of that name")
                    by_name[s.name] = s
                failures += bad
            else:
                notes.append(f"skills in {proj} are not loaded: {why_not}")
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
