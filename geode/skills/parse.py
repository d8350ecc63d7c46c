"""Reading one skill folder's ``SKILL.md``: the YAML front matter (``name``, ``description``, optional
``allowed-tools``, ``license``, ``metadata``) through PyYAML's ``safe_load``, then the instructions. A folder
that does not parse raises :class:`SkillError` with one line saying why."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SKILL_FILE = "SKILL.md"
MAX_SKILL_BYTES = 256 * 1024
MAX_NAME = 64
MAX_DESCRIPTION = 1024
NAME_RE = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
KNOWN_KEYS = frozenset({"name", "description", "allowed-tools", "license", "metadata", "compatibility"})


class SkillError(ValueError):
    """A skill folder that cannot be used: ``folder`` and a one-line ``reason``."""

    def __init__(self, folder: Path, reason: str) -> None:
        super().__init__(f"{folder}: {reason}")
        self.folder = folder
        self.reason = reason


@dataclass(frozen=True)
class Skill:
    """One parsed skill. ``allowed_tools``: the front matter's list as written (None: the key is absent)."""

    name: str
    description: str
    folder: Path
    source: str  # "home" | "project"
    body: str
    allowed_tools: tuple[str, ...] | None = None
    license: str = ""
    metadata: dict[str, Any] = field(default_factory=dict)


def split_front_matter(text: str) -> tuple[str, str] | None:
    """``(yaml, body)`` of a file that opens with a ``---`` line and has a closing ``---`` line, else None."""
    lines = text.splitlines(keepends=True)
    if not lines or lines[0].strip() != "---":
        return None
    for i in range(1, len(lines)):
        if lines[i].strip() == "---":
            return "".join(lines[1:i]), "".join(lines[i + 1 :])
    return None


def tool_list(raw: Any) -> tuple[str, ...]:
    """``allowed-tools`` as names: a YAML list, or a string separated by commas or spaces (Claude Code writes
    ``Read, Grep, Bash(python:*)``; the Agent Skills spec ``Read Grep``); parentheses keep their spaces."""
    if isinstance(raw, list):
        items = [str(x).strip() for x in raw]
    elif isinstance(raw, str):
        items, depth, cur = [], 0, ""
        for ch in raw:
            depth += (ch == "(") - (ch == ")")
            if depth <= 0 and (ch == "," or ch.isspace()):
                items.append(cur)
                cur, depth = "", 0
            else:
                cur += ch
        items.append(cur)
    else:
        raise ValueError("allowed-tools must be a list or a string of tool names")
    return tuple(i.strip() for i in items if i.strip())


def _text(meta: dict[str, Any], key: str, limit: int) -> str:
    value = meta.get(key)
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"front matter has no {key!r} (a non-empty string is required)")
    value = " ".join(value.split())
    if len(value) > limit:
        raise ValueError(f"{key!r} is longer than {limit} characters")
    return value


def parse_skill(folder: Path, source: str) -> Skill:
    """The skill in ``folder`` (its ``SKILL.md``); :class:`SkillError` naming what is wrong."""
    import yaml  # only where skills are read: the CLI's start-up never pays for it

    path = folder / SKILL_FILE
    try:
        if path.stat().st_size > MAX_SKILL_BYTES:
            raise SkillError(folder, f"{SKILL_FILE} is larger than {MAX_SKILL_BYTES} bytes")
        text = path.read_bytes().decode("utf-8-sig")  # a byte order mark is not part of the text
    except FileNotFoundError:
        raise SkillError(folder, f"no {SKILL_FILE}") from None
    except UnicodeDecodeError:
        raise SkillError(folder, f"{SKILL_FILE} is not UTF-8 text") from None
    except OSError as exc:
        raise SkillError(folder, f"cannot read {SKILL_FILE}: {exc.strerror or exc}") from None
    parts = split_front_matter(text)
    if parts is None:
        raise SkillError(folder, f"{SKILL_FILE} does not start with YAML front matter between '---' lines")
    try:
        meta = yaml.safe_load(parts[0])
    except yaml.YAMLError as exc:
        where = getattr(exc, "problem_mark", None)
        line = f" (line {where.line + 2})" if where is not None else ""
        problem = getattr(exc, "problem", None) or type(exc).__name__
        raise SkillError(folder, f"front matter is not valid YAML{line}: {problem}") from None
    if not isinstance(meta, dict):
        raise SkillError(folder, "front matter is not a mapping of keys to values")
    try:
        name = _text(meta, "name", MAX_NAME)
        if not NAME_RE.match(name):
            raise ValueError(f"name {name!r} must be lowercase letters, digits and single hyphens")
        description = _text(meta, "description", MAX_DESCRIPTION)
        allowed = tool_list(meta["allowed-tools"]) if meta.get("allowed-tools") is not None else None
        lic = meta.get("license", "")
        if not isinstance(lic, str):
            raise ValueError("'license' must be a string")
        extra = meta.get("metadata") or {}
        if not isinstance(extra, dict):
            raise ValueError("'metadata' must be a mapping")
    except ValueError as exc:
        raise SkillError(folder, str(exc)) from None
    return Skill(name, description, folder, source, parts[1].strip(), allowed, lic, dict(extra))
