"""Session scopes and where each scope's memory lives.

A session's *scope* (``SessionSpec.scope``, carried in its turn settings, recorded once in its checkpoint
meta) says whose session it is, so memory and search never cross from one audience to another:

- ``"operator"``: the operator's own CLI sessions (IPC, REPL);
- ``"chat:<platform>-<chat>"``: a bound chat's sessions (the key of its workspace folder,
  ``geode.messengers.workspaces.chat_dir_name``);
- ``"job:<job name>"``: a scheduled job's sessions; ``"hook:<route>"``: a webhook route's;
- ``""``: none (HEADLESS/MCP sessions; a delegated child inherits its parent's scope).

:func:`memory_paths` maps a scope to its MEMORY.md file(s) under ``$GEODE_HOME/memory`` (outside every
workspace, so the file tools' default roots never reach it)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal

OPERATOR = "operator"
NO_SCOPE = ""
MEMORY_DIR = "memory"  # $GEODE_HOME/memory
MEMORY_FILE = "MEMORY.md"
PROJECT_MEMORY = Path(".geode") / MEMORY_FILE  # a trusted project's own, beside its .geode/config.toml
ScopeKind = Literal["operator", "chat", "job", "hook", ""]
_KINDS: dict[str, str] = {"chat": "chats", "job": "jobs", "hook": "hooks"}  # kind -> folder under memory/
_KEY = re.compile(r"[A-Za-z0-9_.\-]{1,128}")  # one folder name (never a path: '.' and '..' refused)


class ScopeError(ValueError):
    """A scope string that is not one of the forms above."""


def chat_scope(key: str) -> str:
    return _make("chat", key)


def job_scope(name: str) -> str:
    return _make("job", name)


def hook_scope(route: str) -> str:
    return _make("hook", route)


def _make(kind: str, key: str) -> str:
    scope = f"{kind}:{key}"
    parse_scope(scope)
    return scope


def parse_scope(scope: str) -> tuple[ScopeKind, str]:
    """``(kind, key)`` of a scope (``("operator", "")``, ``("", "")``); anything else is a ScopeError."""
    if scope == OPERATOR:
        return "operator", ""
    if scope == NO_SCOPE:
        return "", ""
    kind, sep, key = scope.partition(":")
    if not sep or kind not in _KINDS:
        raise ScopeError(f"scope {scope!r}: expected operator, chat:<key>, job:<name> or hook:<route>")
    if not _KEY.fullmatch(key) or key in (".", ".."):
        raise ScopeError(
            f"scope {scope!r}: the key must be 1-128 of letters, digits, '_', '.', '-' (not '..')"
        )
    return kind, key  # type: ignore[return-value]


def memory_root(home_root: Path) -> Path:
    return home_root / MEMORY_DIR


def memory_paths(
    scope: str, home_root: Path, *, workspace: str | Path | None = None, trusted: bool = False
) -> list[Path]:
    """The MEMORY.md files of ``scope``, the one ``memory_save`` writes first: operator →
    ``memory/MEMORY.md`` (+ ``<workspace>/.geode/MEMORY.md`` when the workspace is a trusted project, read
    only); chat/job/hook → ``memory/{chats,jobs,hooks}/<key>/MEMORY.md``; no scope → none."""
    kind, key = parse_scope(scope)
    root = memory_root(home_root)
    if kind == "operator":
        out = [root / MEMORY_FILE]
        if trusted and workspace:
            out.append(Path(workspace) / PROJECT_MEMORY)
        return out
    if kind == "":
        return []
    return [root / _KINDS[kind] / key / MEMORY_FILE]


def writable_path(scope: str, home_root: Path) -> Path | None:
    """The file ``memory_save`` edits for ``scope`` (None: a session without a scope has no memory)."""
    paths = memory_paths(scope, home_root)
    return paths[0] if paths else None
