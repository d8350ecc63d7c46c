"""File discovery and search: glob_files {pattern, path} and grep_files {pattern, path, glob}. Both walk
inside the boundary only (``fs_guard.walk``) and report what they skipped."""

from __future__ import annotations

import fnmatch
import os
import re
from collections.abc import Callable
from functools import lru_cache
from typing import Any

from geode.tools.builtin.files import boundary, resolve
from geode.tools.builtin.fs_guard import Refused, Skips, classify, read_regular, walk
from geode.tools.handlers import ToolEnv, ToolFailure
from geode.tools.paths import InvalidPath, validate_raw

MAX_RESULTS = 1000
MAX_MATCHES = 500
MAX_FILE_BYTES = 2 * 1024 * 1024
SKIP_DIRS = frozenset({".git", "node_modules", ".venv", "__pycache__"})


def _segments(pattern: str) -> tuple[str, ...]:
    """The pattern's segments; absolute patterns, ``..`` and NUL bytes are refused (use ``path``)."""
    try:
        validate_raw(pattern)
    except InvalidPath as exc:
        raise ToolFailure(f"invalid glob pattern: {exc}", "invalid_tool_input") from None
    if not pattern or pattern.startswith(("/", "~")):
        raise ToolFailure("the glob pattern must be relative to path", "invalid_tool_input")
    segs = tuple(s for s in pattern.split("/") if s not in ("", "."))
    if ".." in segs:
        raise ToolFailure("the glob pattern may not contain '..'; pass a path instead", "invalid_tool_input")
    return tuple(s for i, s in enumerate(segs) if not (s == "**" and i and segs[i - 1] == "**"))


def _matches(segs: tuple[str, ...], parts: tuple[str, ...]) -> bool:
    """Whether the path ``parts`` matches the pattern ``segs`` (``**``: any number of folders)."""
    return _matcher(segs)(parts)


_MAGIC = re.compile(r"[*?\[]")  # what makes a segment a pattern; any other segment matches itself only


@lru_cache(maxsize=1024)
def _compiled(seg: str) -> Callable[[str], object]:
    """What ``fnmatch.fnmatchcase(name, seg)`` says of a name (truthy or not): a segment without ``*``, ``?``
    or ``[`` matches only the equal name (``fnmatch.translate`` escapes everything else), so it is a string
    comparison, not a regular expression."""
    if _MAGIC.search(seg) is None:
        return seg.__eq__
    return re.compile(fnmatch.translate(seg)).match


def _matcher(segs: tuple[str, ...]) -> Callable[[tuple[str, ...]], bool]:
    """``_matches`` with ``segs`` compiled once (per call, not per entry): each segment's
    ``fnmatch.fnmatchcase`` as the regular expression it compiles to (``fnmatch.translate``), or a plain
    comparison for a segment that is no pattern."""
    each = [_compiled(seg) for seg in segs]
    if "**" not in segs:  # one segment per part: no search
        n = len(segs)
        if n == 1:  # the common one-segment pattern: no loop per entry
            one = each[0]

            def single(parts: tuple[str, ...]) -> bool:
                return len(parts) == 1 and bool(one(parts[0]))

            return single

        def plain(parts: tuple[str, ...]) -> bool:
            return len(parts) == n and all(m(p) for m, p in zip(each, parts, strict=True))

        return plain

    def search(parts: tuple[str, ...]) -> bool:
        # positions in ``parts`` reachable after each pattern segment, left to right
        at = {0}
        for seg, m in zip(segs, each, strict=True):
            if seg == "**":
                at = set(range(min(at), len(parts) + 1))
            else:
                at = {j + 1 for j in at if j < len(parts) and m(parts[j])}
            if not at:
                return False
        return len(parts) in at

    return search


def _mtime(p: str) -> float:
    try:
        return os.stat(p).st_mtime
    except OSError:
        return 0.0


def glob_files(args: dict[str, Any], env: ToolEnv) -> dict[str, Any]:
    segs = _segments(str(args["pattern"]))
    base = resolve(env, args.get("path"))
    if not base.is_dir():
        raise ToolFailure(f"{args.get('path') or '.'} is not a directory", "not_a_directory")
    depth = None if "**" in segs else len(segs)
    skips, found, matches = Skips(), [], _matcher(segs)
    for entry in walk(base, boundary(env), skips, skip_dirs=SKIP_DIRS, max_depth=depth, cancel=env.cancel):
        if matches(entry.rel):
            found.append(entry.text)  # the path's text: no Path made per match and turned back to text
            if len(found) > MAX_RESULTS:
                break
    if len(found) > 1:  # newest first (one match: no stat to sort it)
        found.sort(key=_mtime, reverse=True)
    return {
        "path": str(base),
        "files": found[:MAX_RESULTS],
        "truncated": len(found) > MAX_RESULTS,
        **skips.as_result(),
    }


def grep_files(args: dict[str, Any], env: ToolEnv) -> dict[str, Any]:
    try:
        rx = re.compile(args["pattern"])
    except re.error as exc:
        raise ToolFailure(f"invalid regular expression: {exc}", "invalid_pattern") from None
    base = resolve(env, args.get("path"))
    bound, skips = boundary(env), Skips()
    name_glob = args.get("glob")
    kind = classify(base, bound, skips)  # True: a directory, False: a regular file, None: skipped/missing
    files = (
        (
            e.path
            for e in walk(base, bound, skips, skip_dirs=SKIP_DIRS, cancel=env.cancel)
            if not e.is_dir and not (name_glob and not fnmatch.fnmatch(e.path.name, name_glob))
        )
        if kind
        else iter([base] if kind is False else [])
    )
    matches: list[str] = []
    files_with: set[str] = set()
    truncated = False
    for f in files:
        if env.cancel.is_set():
            break
        try:
            data = read_regular(f, bound, MAX_FILE_BYTES)
        except Refused as exc:
            skips.count(exc.reason or "not_regular")
            continue
        except OSError:
            continue
        if data is None or b"\0" in data[:4096]:
            continue
        for n, line in enumerate(data.decode("utf-8", "replace").splitlines(), 1):
            if rx.search(line):
                matches.append(f"{f}:{n}:{line[:500]}")
                files_with.add(str(f))
                if len(matches) >= MAX_MATCHES:
                    truncated = True
                    break
        if truncated:
            break
    return {"matches": matches, "files": sorted(files_with), "truncated": truncated, **skips.as_result()}
