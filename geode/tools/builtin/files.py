"""File tools with Claude Code's argument names: read_file, write_file, edit_file (exact), list_dir."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

from geode.tools.handlers import ToolEnv, ToolFailure
from geode.tools.paths import PathOutsideRoots, checked_path

DEFAULT_LINES = 2000
MAX_LINE_CHARS = 2000
MAX_READ_BYTES = 5 * 1024 * 1024
MAX_ENTRIES = 1000


def resolve(env: ToolEnv, raw: str | None) -> Path:
    """A path argument resolved in the workspace, refused outside the roots (also checked by policy)."""
    try:
        return checked_path(env.workspace, env.roots, raw or ".")
    except PathOutsideRoots as exc:
        raise ToolFailure(str(exc), "tool_policy_denied") from None


def read_file(args: dict[str, Any], env: ToolEnv) -> dict[str, Any]:
    path = resolve(env, args["file_path"])
    if not path.is_file():
        raise ToolFailure(f"{args['file_path']} is not a file", "file_not_found")
    if path.stat().st_size > MAX_READ_BYTES:
        raise ToolFailure(f"{args['file_path']} is larger than {MAX_READ_BYTES} bytes", "file_too_large")
    lines = path.read_text(errors="replace").splitlines()
    start = max(1, int(args.get("offset") or 1))
    limit = max(1, int(args.get("limit") or DEFAULT_LINES))
    chosen = lines[start - 1 : start - 1 + limit]
    numbered = "\n".join(f"{i:6d}\t{line[:MAX_LINE_CHARS]}" for i, line in enumerate(chosen, start))
    return {
        "file_path": str(path),
        "content": numbered,
        "start_line": start,
        "lines": len(chosen),
        "total_lines": len(lines),
        "truncated": start - 1 + len(chosen) < len(lines),
    }


def _atomic_write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        if path.exists():
            os.chmod(tmp, path.stat().st_mode & 0o7777)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_file(args: dict[str, Any], env: ToolEnv) -> dict[str, Any]:
    path = resolve(env, args["file_path"])
    if path.is_dir():
        raise ToolFailure(f"{args['file_path']} is a directory", "is_a_directory")
    existed = path.exists()
    _atomic_write(path, args["content"])
    return {"file_path": str(path), "bytes": len(args["content"].encode()), "created": not existed}


def edit_file(args: dict[str, Any], env: ToolEnv) -> dict[str, Any]:
    path = resolve(env, args["file_path"])
    if not path.is_file():
        raise ToolFailure(f"{args['file_path']} is not a file", "file_not_found")
    old, new = args["old_string"], args["new_string"]
    if old == new:
        raise ToolFailure("old_string and new_string are identical", "invalid_edit")
    text = path.read_text()
    count = text.count(old)
    if count == 0:
        raise ToolFailure("old_string was not found in the file", "edit_not_found")
    if count > 1 and not args.get("replace_all"):
        raise ToolFailure(
            f"old_string appears {count} times; pass replace_all or give more context", "edit_ambiguous"
        )
    updated = text.replace(old, new) if args.get("replace_all") else text.replace(old, new, 1)
    _atomic_write(path, updated)
    return {"file_path": str(path), "replacements": count if args.get("replace_all") else 1}


def list_dir(args: dict[str, Any], env: ToolEnv) -> dict[str, Any]:
    path = resolve(env, args.get("path"))
    if not path.is_dir():
        raise ToolFailure(f"{args.get('path') or '.'} is not a directory", "not_a_directory")
    entries = []
    for i, child in enumerate(sorted(path.iterdir(), key=lambda p: p.name)):
        if i >= MAX_ENTRIES:
            break
        kind = "dir" if child.is_dir() else "file" if child.is_file() else "other"
        size = child.stat().st_size if kind == "file" else None
        entries.append({"name": child.name, "type": kind, "size": size})
    return {"path": str(path), "entries": entries, "truncated": len(entries) >= MAX_ENTRIES}
