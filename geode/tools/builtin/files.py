"""File tools with Claude Code's argument names: read_file, write_file, edit_file (exact), list_dir."""

from __future__ import annotations

import os
import secrets
import stat
from pathlib import Path
from typing import Any

from geode.tools.builtin.fs_guard import Refused, Skips, classify, fd_path, kind_of, read_regular
from geode.tools.handlers import ToolEnv, ToolFailure
from geode.tools.paths import Boundary, InvalidPath, PathOutsideRoots, checked_path

DEFAULT_LINES = 2000
MAX_LINE_CHARS = 2000
MAX_READ_BYTES = 5 * 1024 * 1024
MAX_ENTRIES = 1000


def resolve(env: ToolEnv, raw: str | None) -> Path:
    """A path argument resolved in the workspace, refused outside the roots (also checked by policy)."""
    try:
        return checked_path(env.workspace, env.roots, raw or ".", boundary(env))
    except InvalidPath as exc:
        raise ToolFailure(f"invalid path: {exc}", "invalid_tool_input") from None
    except PathOutsideRoots as exc:
        raise ToolFailure(str(exc), "tool_policy_denied", reason=exc.reason) from None


def boundary(env: ToolEnv) -> Boundary:
    """The allowed roots of this call minus GEODE homes and credential files: one per call (the secret
    files' identities taken once, the homes met on the way looked up once), shared by its path checks."""
    found = env.memo.get("boundary")
    if found is None:
        found = env.memo["boundary"] = Boundary.of(env.roots)
    return found  # type: ignore[no-any-return]


def read_text(path: Path, env: ToolEnv, raw: str, *, strict: bool = False) -> str:
    """A regular file's text, opened without following it out of the boundary and never a FIFO or device."""
    try:
        data = read_regular(path, boundary(env), MAX_READ_BYTES)
    except FileNotFoundError:
        raise ToolFailure(f"{raw} is not a file", "file_not_found") from None
    except Refused as exc:
        extra = {"reason": exc.reason} if exc.reason else {}
        raise ToolFailure(f"{raw}: {exc.message}", exc.error_type, **extra) from None
    if data is None:
        raise ToolFailure(f"{raw} is larger than {MAX_READ_BYTES} bytes", "file_too_large")
    if not strict:
        return data.decode("utf-8", "replace")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise ToolFailure(f"{raw} is not UTF-8 text", "not_text") from None


def read_file(args: dict[str, Any], env: ToolEnv) -> dict[str, Any]:
    path = resolve(env, args["file_path"])
    lines = read_text(path, env, args["file_path"]).splitlines()
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


def _temp_in(dfd: int, name: str) -> tuple[int, str]:
    """A new temporary file in the directory ``dfd`` created 0666 minus the umask (not mkstemp's 0600)."""
    for _ in range(100):
        tmp = f".{name}.{secrets.token_hex(4)}.tmp"
        try:
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC
            return os.open(tmp, flags, 0o666, dir_fd=dfd), tmp
        except FileExistsError:
            continue
    raise FileExistsError(f"no free temporary name for {name}")


def _atomic_write(path: Path, text: str, env: ToolEnv) -> None:
    """Replace ``path`` atomically: a new file gets the user's umask, an existing one keeps its mode. The
    directory is pinned by a descriptor checked against the boundary, so a swapped parent cannot redirect
    the write."""
    path.parent.mkdir(parents=True, exist_ok=True)
    dfd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        why = boundary(env).verdict(fd_path(dfd, path.parent))
        if why is not None:
            msg = f"{path.parent} resolves outside the allowed roots"
            raise ToolFailure(msg, "tool_policy_denied", reason=why)
        fd, tmp = _temp_in(dfd, path.name)
        try:
            with os.fdopen(fd, "w") as f:
                f.write(text)
            try:
                os.chmod(tmp, os.stat(path.name, dir_fd=dfd).st_mode & 0o7777, dir_fd=dfd)
            except FileNotFoundError:
                pass
            os.replace(tmp, path.name, src_dir_fd=dfd, dst_dir_fd=dfd)
        except BaseException:
            try:
                os.unlink(tmp, dir_fd=dfd)
            except FileNotFoundError:
                pass
            raise
    finally:
        os.close(dfd)


def write_file(args: dict[str, Any], env: ToolEnv) -> dict[str, Any]:
    path = resolve(env, args["file_path"])
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        mode = None
    if mode is not None and stat.S_ISDIR(mode):
        raise ToolFailure(f"{args['file_path']} is a directory", "is_a_directory")
    if mode is not None and not stat.S_ISREG(mode):
        raise ToolFailure(
            f"{args['file_path']} is a {kind_of(mode)}, not a regular file", "not_a_regular_file"
        )
    existed = mode is not None
    _atomic_write(path, args["content"], env)
    return {"file_path": str(path), "bytes": len(args["content"].encode()), "created": not existed}


def edit_file(args: dict[str, Any], env: ToolEnv) -> dict[str, Any]:
    path = resolve(env, args["file_path"])
    old, new = args["old_string"], args["new_string"]
    if old == new:
        raise ToolFailure("old_string and new_string are identical", "invalid_edit")
    text = read_text(path, env, args["file_path"], strict=True)
    count = text.count(old)
    if count == 0:
        raise ToolFailure("old_string was not found in the file", "edit_not_found")
    if count > 1 and not args.get("replace_all"):
        raise ToolFailure(
            f"old_string appears {count} times; pass replace_all or give more context", "edit_ambiguous"
        )
    updated = text.replace(old, new) if args.get("replace_all") else text.replace(old, new, 1)
    _atomic_write(path, updated, env)
    return {"file_path": str(path), "replacements": count if args.get("replace_all") else 1}


def list_dir(args: dict[str, Any], env: ToolEnv) -> dict[str, Any]:
    path = resolve(env, args.get("path"))
    if not path.is_dir():
        raise ToolFailure(f"{args.get('path') or '.'} is not a directory", "not_a_directory")
    bound, skips = boundary(env), Skips()
    entries: list[dict[str, Any]] = []
    for child in sorted(path.iterdir(), key=lambda p: p.name):
        if len(entries) >= MAX_ENTRIES:
            break
        before = skips.not_regular
        is_dir = classify(child, bound, skips)  # symlinks out, homes, credentials: skipped and counted
        if is_dir is None and skips.not_regular > before:  # a FIFO, socket or device: named, never opened
            entries.append({"name": child.name, "type": "other", "size": None})
            skips.not_regular = before
        elif is_dir is not None:
            size = None if is_dir else _size(child)
            entries.append({"name": child.name, "type": "dir" if is_dir else "file", "size": size})
    result = {"path": str(path), "entries": entries, "truncated": len(entries) >= MAX_ENTRIES}
    return {
        **result,
        "skipped_outside_roots": skips.outside_roots,
        "skipped_geode_home": skips.geode_home,
        "skipped_credential_files": skips.credential_files,
    }


def _size(p: Path) -> int | None:
    try:
        return os.stat(p).st_size
    except OSError:
        return None
