"""The trust check run at `geode trust` time and at every load: a trusted project directory is opened without
following a symlink, must still be the directory that was trusted (device, inode, owner), owned by the
daemon's uid and not group/world-writable; its MCP files are read through that open directory."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import Any

from geode.protocol.errors import ConfigError
from geode.tools.mcp.trust import parse_project_file
from geode.tools.mcp.trust_store import Binding, Identity

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
MAX_FILE_BYTES = 1 << 20


class TrustDropped(ConfigError):
    """The trusted project is not loaded: the message says why and how to trust it again."""


def loose(st: os.stat_result, uid: int) -> str | None:
    """Why a directory or file of a trusted project may not be trusted: another owner, or others can write."""
    if st.st_uid != uid:
        return f"owned by uid {st.st_uid}, not {uid} (the daemon's user)"
    if st.st_mode & 0o002:
        return f"world-writable (mode {stat.S_IMODE(st.st_mode):04o})"
    if st.st_mode & 0o020:
        return f"group-writable (mode {stat.S_IMODE(st.st_mode):04o})"
    return None


def open_directory(path: Path) -> int:
    """An fd on ``path`` itself (a symlink, a missing path or a non-directory is a ``TrustDropped``)."""
    try:
        return os.open(path, _DIR_FLAGS)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR) and os.path.islink(path):
            raise TrustDropped(
                f"{path} is now a symbolic link (to {os.readlink(path)}); it is not followed"
            ) from None
        if exc.errno == errno.ENOENT:
            raise TrustDropped(f"{path} is missing") from None
        raise TrustDropped(f"{path} cannot be opened as a directory: {exc.strerror}") from None


def identity_now(path: Path, uid: int | None = None) -> Identity:
    """The identity to record at `geode trust` time; a directory that may not be trusted: ``ConfigError``."""
    uid = os.geteuid() if uid is None else uid
    fd = open_directory(path)
    try:
        st = os.fstat(fd)
    finally:
        os.close(fd)
    why = loose(st, uid)
    if why:
        raise ConfigError(f"{path} is {why}: refusing to trust it (run `chmod go-w {path}` if it is yours)")
    return Identity.of(st)


def open_trusted(path: Path, binding: Binding, uid: int | None = None) -> int:
    """An fd on the trusted directory when it is still the one `geode trust` bound; else ``TrustDropped``."""
    uid = os.geteuid() if uid is None else uid
    fd = open_directory(path)
    try:
        now = Identity.of(os.fstat(fd))
        if now != binding.identity:
            raise TrustDropped(
                f"{path} is not the directory that was trusted (then: {binding.identity.text()}; "
                f"now: {now.text()}); it was removed and re-created, or replaced"
            )
        why = loose(os.fstat(fd), uid)
        if why:
            raise TrustDropped(f"{path} is now {why}")
        return fd
    except BaseException:
        os.close(fd)
        raise


def read_mcp_files(fd: int, project: Path, *, home_root: Path | None) -> list[tuple[Path, Any]]:
    """``(path, mapping or ConfigError)`` for the project's ``.geode/config.toml`` and ``.mcp.json`` that
    exist, read through ``fd`` (no symlink followed; a file another uid owns or can write is refused)."""
    out: list[tuple[Path, Any]] = []
    try:
        home = os.stat(home_root) if home_root is not None else None
    except OSError:
        home = None
    sub = _open_at(fd, ".geode", _DIR_FLAGS, project / ".geode")
    if isinstance(sub, int):
        try:
            st = os.fstat(sub)
            is_home = home is not None and (st.st_dev, st.st_ino) == (home.st_dev, home.st_ino)
            if not is_home:  # $GEODE_HOME/config.toml is the global config, not a project's
                why = loose(st, os.geteuid())
                if why:
                    out.append((project / ".geode", ConfigError(f"{project / '.geode'} is {why}; not read")))
                else:
                    out.extend(_read_file(sub, "config.toml", project / ".geode" / "config.toml"))
        finally:
            os.close(sub)
    elif sub is not None:
        out.append((project / ".geode", sub))
    out.extend(_read_file(fd, ".mcp.json", project / ".mcp.json"))  # after, as trust.PROJECT_FILES
    return out


def _open_at(fd: int, name: str, flags: int, shown: Path) -> int | ConfigError | None:
    try:
        return os.open(name, flags, dir_fd=fd)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            return ConfigError(f"{shown} is a symbolic link or not the expected kind of file; not followed")
        return ConfigError(f"{shown}: cannot open: {exc.strerror}")


def _read_file(dir_fd: int, name: str, shown: Path) -> list[tuple[Path, Any]]:
    opened = _open_at(dir_fd, name, _FILE_FLAGS, shown)
    if opened is None:
        return []
    if isinstance(opened, ConfigError):
        return [(shown, opened)]
    with os.fdopen(opened, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):
            return [(shown, ConfigError(f"{shown} is not a regular file; not read"))]
        why = loose(st, os.geteuid())
        if why:
            return [(shown, ConfigError(f"{shown} is {why}; not read"))]
        raw = f.read(MAX_FILE_BYTES + 1)
    if len(raw) > MAX_FILE_BYTES:
        return [(shown, ConfigError(f"{shown} is larger than {MAX_FILE_BYTES} bytes; not read"))]
    try:
        return [(shown, parse_project_file(shown, raw))]
    except ConfigError as exc:
        return [(shown, exc)]
