"""Declared prompt sources: GEODE.md sections (shipped default + project) and rules files (home + project)."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

DEFAULT_GEODE_MD = Path(__file__).resolve().parent.parent / "defaults" / "GEODE.md"
MAX_RULE_CHARS = 4000
MAX_RULES = 20

_HEADING = re.compile(r"^##\s+(.+?)\s*$", re.MULTILINE)


def parse_sections(text: str) -> dict[str, str]:
    """``## Heading`` sections of a markdown file, in order (text before the first heading is dropped)."""
    return dict(_parse_sections(text))


@lru_cache(maxsize=16)
def _parse_sections(text: str) -> dict[str, str]:  # (the same text every call of a turn; callers get a copy)
    out: dict[str, str] = {}
    matches = list(_HEADING.finditer(text))
    for i, m in enumerate(matches):
        end = matches[i + 1].start() if i + 1 < len(matches) else len(text)
        body = text[m.end() : end].strip()
        if body:
            out[m.group(1)] = body
    return out


_READ: dict[Path, tuple[tuple[int, int, int], str]] = {}  # path -> (inode, mtime_ns, size) and its text
_READ_LIMIT = 64


def _read(path: Path) -> str | None:
    """The file's text, read again only when its inode, mtime or size changed (the prompt is built for every
    call of a turn; the sources rarely change between two)."""
    try:
        st = os.stat(path)
        key = (st.st_ino, st.st_mtime_ns, st.st_size)
        hit = _READ.get(path)
        if hit is not None and hit[0] == key:
            return hit[1]
        text = path.read_text(encoding="utf-8")
    except (FileNotFoundError, IsADirectoryError, PermissionError, UnicodeDecodeError, NotADirectoryError):
        return None
    if len(_READ) >= _READ_LIMIT:
        _READ.clear()
    _READ[path] = (key, text)
    return text


def geode_md_sections(workspace: Path | None, default: Path = DEFAULT_GEODE_MD) -> dict[str, str]:
    """Default sections, overridden (same heading) or extended by the project's GEODE.md."""
    sections = parse_sections(_read(default) or "")
    if workspace is not None:
        for candidate in (workspace / "GEODE.md", workspace / ".geode" / "GEODE.md"):
            text = _read(candidate)
            if text is not None:
                sections.update(parse_sections(text))
                break
    return sections


Stamp = tuple[int, int, int] | None  # a file's (inode, mtime_ns, size); None: not there


def _stamp(path: str) -> Stamp:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_ino, st.st_mtime_ns, st.st_size)


_LISTED: dict[str, tuple[Stamp, tuple[str, ...]]] = {}  # rules directory -> its stamp and its *.md names


def _md_names(d: str) -> tuple[Stamp, tuple[str, ...]]:
    """The ``*.md`` names in directory ``d``, listed again only when the directory's stamp changed (a file
    added, removed or renamed there changes its mtime)."""
    key = _stamp(d)
    hit = _LISTED.get(d)
    if hit is not None and hit[0] == key:
        return hit
    names: tuple[str, ...] = ()
    if key is not None and os.path.isdir(d):
        try:
            names = tuple(sorted(p.name for p in Path(d).glob("*.md")))  # what rule_files reads
        except OSError:
            names = ()
    if len(_LISTED) >= _READ_LIMIT:
        _LISTED.clear()
    _LISTED[d] = (key, names)
    return key, names


_PATHS: dict[tuple[object, ...], tuple[tuple[str, ...], tuple[str | None, ...]]] = {}


def _stamp_paths(
    workspace: Path | None, home_rules: Path | None, default: Path
) -> tuple[tuple[str, ...], tuple[str | None, ...]]:
    """The GEODE.md files and the rules directories :func:`sources_stamp` stats, as path strings joined once
    per (default, workspace, home rules) (the prompt is built for every model call)."""
    key = (default, workspace, home_rules)
    hit = _PATHS.get(key)
    if hit is not None:
        return hit
    files = [str(default)]
    ws = str(workspace) if workspace is not None else None
    if ws is not None:
        files += [os.path.join(ws, "GEODE.md"), os.path.join(ws, ".geode", "GEODE.md")]
    dirs = (
        str(home_rules) if home_rules is not None else None,
        os.path.join(ws, ".geode", "rules") if ws is not None else None,
    )
    if len(_PATHS) >= _READ_LIMIT:
        _PATHS.clear()
    out = _PATHS[key] = (tuple(files), dirs)
    return out


def sources_stamp(
    workspace: Path | None, home_rules: Path | None, default: Path = DEFAULT_GEODE_MD
) -> tuple[object, ...]:
    """The stamps of every file :func:`geode_md_sections` and :func:`rule_files` would read, and of the rules
    directories: equal stamps, the same sections and rules (a few ``stat`` calls, no read, no parse)."""
    files, dirs = _stamp_paths(workspace, home_rules, default)
    out: list[object] = [_stamp(f) for f in files]
    for d in dirs:
        if d is None:
            out.append((None, ()))
            continue
        key, names = _md_names(d)
        out.append((key, names))
        out += [_stamp(os.path.join(d, n)) for n in names]
    return tuple(out)


@dataclass(frozen=True)
class RuleFile:
    name: str
    path: Path
    text: str
    scope: str  # "home" | "project"


def rule_files(home_rules: Path | None, workspace: Path | None) -> list[RuleFile]:
    """``<home>/rules/*.md`` then ``<workspace>/.geode/rules/*.md``; project files replace same names."""
    found: dict[str, RuleFile] = {}
    dirs = [(home_rules, "home"), ((workspace / ".geode" / "rules") if workspace else None, "project")]
    for d, scope in dirs:
        if d is None or not d.is_dir():
            continue
        for p in sorted(d.glob("*.md")):
            text = _read(p)
            if text is not None and text.strip():
                found[p.name] = RuleFile(p.name, p, text.strip()[:MAX_RULE_CHARS], scope)
    return [found[k] for k in sorted(found)][:MAX_RULES]


@dataclass
class PromptSources:
    """Everything the system prompt of a turn is built from."""

    workspace: Path | None = None
    home_rules: Path | None = None
    directives: list[str] = field(default_factory=list)
    default_geode_md: Path = DEFAULT_GEODE_MD
    memory: str = ""  # the <agent_memory> block of the session's scope (geode/memory/prompt_block.py)
    skills: list[tuple[str, str]] = field(default_factory=list)  # (name, description): <available_skills>
