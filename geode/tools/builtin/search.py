"""File discovery and search: glob_files {pattern, path} and grep_files {pattern, path, glob}."""

from __future__ import annotations

import fnmatch
import os
import re
from pathlib import Path
from typing import Any

from geode.tools.builtin.files import resolve
from geode.tools.handlers import ToolEnv, ToolFailure

MAX_RESULTS = 1000
MAX_MATCHES = 500
MAX_FILE_BYTES = 2 * 1024 * 1024
SKIP_DIRS = {".git", "node_modules", ".venv", "__pycache__"}


def glob_files(args: dict[str, Any], env: ToolEnv) -> dict[str, Any]:
    base = resolve(env, args.get("path"))
    if not base.is_dir():
        raise ToolFailure(f"{args.get('path') or '.'} is not a directory", "not_a_directory")
    found: list[Path] = []
    for p in base.glob(args["pattern"]):
        if any(part in SKIP_DIRS for part in p.relative_to(base).parts):
            continue
        found.append(p)
        if len(found) > MAX_RESULTS:
            break
    found.sort(key=lambda p: p.stat().st_mtime if p.exists() else 0, reverse=True)
    return {
        "path": str(base),
        "files": [str(p) for p in found[:MAX_RESULTS]],
        "truncated": len(found) > MAX_RESULTS,
    }


def _walk(base: Path, glob: str | None):  # type: ignore[no-untyped-def]
    if base.is_file():
        yield base
        return
    for root, dirs, files in os.walk(base):
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS)
        for name in sorted(files):
            if glob and not fnmatch.fnmatch(name, glob):
                continue
            yield Path(root) / name


def grep_files(args: dict[str, Any], env: ToolEnv) -> dict[str, Any]:
    try:
        rx = re.compile(args["pattern"])
    except re.error as exc:
        raise ToolFailure(f"invalid regular expression: {exc}", "invalid_pattern") from None
    base = resolve(env, args.get("path"))
    matches: list[str] = []
    files_with: set[str] = set()
    for f in _walk(base, args.get("glob")):
        if env.cancel.is_set():
            break
        try:
            if f.stat().st_size > MAX_FILE_BYTES:
                continue
            data = f.read_bytes()
        except OSError:
            continue
        if b"\0" in data[:4096]:
            continue
        for n, line in enumerate(data.decode("utf-8", "replace").splitlines(), 1):
            if rx.search(line):
                matches.append(f"{f}:{n}:{line[:500]}")
                files_with.add(str(f))
                if len(matches) >= MAX_MATCHES:
                    return {"matches": matches, "files": sorted(files_with), "truncated": True}
    return {"matches": matches, "files": sorted(files_with), "truncated": False}
