"""Private directories and secret files: create a directory 0700, or refuse one another user could
reach (a symlink, someone else's, group/world-accessible); tighten a loose secret file to 0600; replace a
private file atomically."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from geode.protocol.errors import ConfigError


def is_private_dir(path: Path) -> bool:
    """True when ``path`` is a real directory (no symlink) owned by us and closed to group and world."""
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return _problem(st) is None


def ensure_private_dir(path: Path, what: str = "run directory") -> None:
    """Create ``path`` 0700, or accept it only when it already is ours, a real directory and private.

    Checked with lstat first, then opened with O_NOFOLLOW|O_DIRECTORY and checked again with fstat, so a
    directory swapped in between is refused too. Raises a one-line ConfigError naming the path and the
    problem; never loosens or chowns anything.
    """
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    except OSError as exc:
        raise ConfigError(f"{what} {path}: cannot create it: {exc.strerror}") from exc
    try:
        st = os.lstat(path)
    except OSError as exc:
        raise ConfigError(f"{what} {path}: {exc.strerror}") from exc
    problem = _problem(st)
    if problem is None:
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError as exc:
            problem = f"cannot open it without following links ({exc.strerror})"
        else:
            try:
                fst = os.fstat(fd)
                if (fst.st_dev, fst.st_ino) != (st.st_dev, st.st_ino):
                    problem = "was replaced while being checked"
                else:
                    problem = _problem(fst)
            finally:
                os.close(fd)
    if problem is not None:
        raise ConfigError(
            f"{what} {path} {problem}; refusing to use it (remove it, or set XDG_RUNTIME_DIR "
            "or a shorter GEODE_HOME)"
        )


def _problem(st: os.stat_result) -> str | None:
    if stat.S_ISLNK(st.st_mode):
        return "is a symlink"
    if not stat.S_ISDIR(st.st_mode):
        return "is not a directory"
    if st.st_uid != os.geteuid():
        return f"is owned by uid {st.st_uid}, not by this user (uid {os.geteuid()})"
    mode = stat.S_IMODE(st.st_mode)
    if mode & 0o077:
        return f"is group/world-accessible (mode {mode:04o}, want 0700)"
    return None


def loose_mode(path: Path) -> int | None:
    """The mode of ``path`` when group or world can read/write it (None when private or absent)."""
    try:
        st = os.lstat(path)
    except OSError:
        return None
    if not stat.S_ISREG(st.st_mode):
        return None
    mode = stat.S_IMODE(st.st_mode)
    return mode if mode & 0o077 else None


def tighten_file(path: Path) -> int | None:
    """chmod ``path`` to 0600 when it is group/world-accessible; the old mode when it changed, else None."""
    mode = loose_mode(path)
    if mode is None:
        return None
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        os.fchmod(fd, 0o600)
    except OSError:
        return None
    finally:
        os.close(fd)
    return mode


def private_file(path: Path) -> None:
    """Create ``path`` 0600 when absent (for a log or a record file); tighten it when it is loose."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)
    os.close(fd)
    tighten_file(path)


def write_private(path: Path, data: bytes) -> None:
    """Replace ``path`` atomically with ``data``, 0600: written and synced beside it (never through a
    symlink), then renamed over it; a failed write leaves the old file and no temporary one."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
