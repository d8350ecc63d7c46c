"""Resolving tool paths against the session workspace and refusing anything outside the allowed roots."""

from __future__ import annotations

import os
from pathlib import Path

from geode.tools.spec import ToolContext


class PathOutsideRoots(ValueError):
    """A path that resolves outside every allowed root (a policy denial, not a tool error)."""


def workspace_of(ctx: ToolContext, default: Path | None = None) -> Path:
    """The session's workspace (the loop sets it); falls back to ``default`` or the process cwd."""
    raw = ctx.workspace or (str(default) if default else os.getcwd())
    return Path(raw).expanduser().resolve()


def resolve_in(workspace: Path, raw: str) -> Path:
    """``raw`` made absolute against ``workspace`` with symlinks and ``..`` resolved (need not exist)."""
    p = Path(os.path.expanduser(raw))
    if not p.is_absolute():
        p = workspace / p
    return Path(os.path.realpath(p))


def within(path: Path, roots: tuple[Path, ...]) -> bool:
    return any(path == r or path.is_relative_to(r) for r in roots)


def checked_path(workspace: Path, roots: tuple[Path, ...], raw: str) -> Path:
    """The resolved path, or PathOutsideRoots when it lies outside every root."""
    p = resolve_in(workspace, raw)
    if not within(p, tuple(Path(os.path.realpath(r)) for r in roots)):
        raise PathOutsideRoots(f"path {raw!r} resolves outside the allowed roots")
    return p
