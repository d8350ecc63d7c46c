"""Opening and walking files inside the boundary: symlinks out, GEODE homes and credential files are skipped
(counted), special files (FIFOs, sockets, devices) are never opened (stat first, O_NONBLOCK against a swap),
and every opened descriptor is checked again by where it really points (``/proc/self/fd``) and what it is."""

from __future__ import annotations

import os
import stat
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from geode.tools.builtin import listings
from geode.tools.paths import Boundary
from geode.tools.secret_files import Folder

_OPEN_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC


class Refused(OSError):
    """The file may not be opened: ``error_type`` and ``reason`` say why (for a ToolFailure)."""

    def __init__(self, message: str, error_type: str, reason: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.error_type = error_type
        self.reason = reason


REFUSALS = {
    "outside_roots": "resolves outside the allowed roots",
    "geode_home": "is inside a GEODE home or one of its files; file tools never open one",
    "credential_file": "is a credential file; file tools never open credentials",
}


def kind_of(mode: int) -> str:
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISDIR(mode):
        return "directory"
    if stat.S_ISFIFO(mode):
        return "FIFO"
    if stat.S_ISSOCK(mode):
        return "socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "device"
    return "special file"


def fd_path(fd: int, fallback: Path) -> Path:
    """Where an open descriptor really points (``/proc/self/fd``), else the resolved fallback."""
    try:
        return Path(os.readlink(f"/proc/self/fd/{fd}"))
    except OSError:
        return Path(os.path.realpath(fallback))


def open_regular(path: Path, boundary: Boundary) -> int:
    """A read-only descriptor of the regular file at ``path`` (symlinks followed) that really lies inside the
    boundary. FileNotFoundError when missing; Refused for a non-regular file or one outside the boundary."""
    mode = os.stat(path).st_mode  # stat, never open, a special file: opening a FIFO blocks, a device acts
    if not stat.S_ISREG(mode):
        kind = kind_of(mode)
        error_type = "file_not_found" if kind == "directory" else "not_a_regular_file"
        raise Refused(f"{path} is a {kind}, not a regular file", error_type)
    fd = os.open(path, _OPEN_FLAGS)  # O_NONBLOCK: a FIFO swapped in after the stat does not block
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise Refused(f"{path} is not a regular file", "not_a_regular_file")
        why = boundary.verdict(fd_path(fd, path), st)  # the opened file's identity: a hardlink is itself
        if why is not None:
            raise Refused(f"{path} {REFUSALS.get(why, REFUSALS['outside_roots'])}", "tool_policy_denied", why)
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_regular(path: Path, boundary: Boundary, max_bytes: int) -> bytes | None:
    """The bytes of a regular file inside the boundary, or None when it is larger than ``max_bytes``."""
    fd = open_regular(path, boundary)
    try:
        if os.fstat(fd).st_size > max_bytes:
            return None
        chunks, total = [], 0
        while total <= max_bytes:
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
        return None if total > max_bytes else b"".join(chunks)
    finally:
        os.close(fd)


@dataclass
class Skips:
    """What a listing left out, reported with the result."""

    outside_roots: int = 0
    geode_home: int = 0
    credential_files: int = 0
    not_regular: int = 0

    def count(self, reason: str) -> None:
        if reason == "geode_home":
            self.geode_home += 1
        elif reason == "credential_file":
            self.credential_files += 1
        elif reason == "outside_roots":
            self.outside_roots += 1
        else:
            self.not_regular += 1

    def as_result(self) -> dict[str, int]:
        return {
            "skipped_outside_roots": self.outside_roots,
            "skipped_geode_home": self.geode_home,
            "skipped_credential_files": self.credential_files,
            "skipped_not_regular": self.not_regular,
        }


class Entry(NamedTuple):
    """A listed path (as seen under the base: a symlink keeps its own name), its parts relative to the base,
    and whether it is a directory. Symlinked directories are listed but never descended."""

    text: str
    rel: tuple[str, ...]
    is_dir: bool

    @property
    def path(self) -> Path:
        return Path(self.text)


def classify(path: Path, boundary: Boundary, skips: Skips) -> bool | None:
    """For one directory entry: True (a directory), False (a regular file), None (skipped and counted, or
    gone). A symlink counts by where it resolves; nothing is opened."""
    kind = _classify(str(path), boundary, skips)
    return None if kind is None else kind[0]


def _classify(
    path: str, boundary: Boundary, skips: Skips, lst: os.stat_result | None = None
) -> tuple[bool, bool] | None:
    """``classify`` on a path's text: (is a directory, is a symlink), or None. ``lst``: its ``lstat``
    when the caller has it (``listings``)."""
    if lst is None:
        try:
            lst = os.lstat(path)
        except OSError:
            return None
    link = stat.S_ISLNK(lst.st_mode)
    real = os.path.realpath(path) if link else path
    try:
        st = os.stat(path) if link else lst
    except OSError:  # a dangling link
        st = None
    why = boundary.verdict(real, st)
    if why is not None:
        skips.count(why)
        return None
    if st is None:
        return None
    return _kind(st, link, skips)


def _classify_in(
    path: str, name: str, boundary: Boundary, skips: Skips, folder: Folder, lst: os.stat_result
) -> tuple[bool, bool] | None:
    """``_classify`` of the entry ``name`` (its ``lstat``: ``lst``) of a directory where only the secret files
    can refuse anything (``Boundary.secrets_only_below``); ``folder``: what holds for all its entries
    (``SecretFiles.folder``)."""
    if stat.S_ISLNK(lst.st_mode):  # where it points decides: the whole check
        return _classify(path, boundary, skips, lst)
    why = boundary.secrets.entry_verdict(path, name, lst, folder)
    if why is not None:
        skips.count(why)
        return None
    mode = lst.st_mode  # ``_kind(lst, False, skips)`` in place: one call fewer per entry
    if stat.S_ISREG(mode):
        return _FILE
    if stat.S_ISDIR(mode):
        return _DIR
    skips.count("not_regular")
    return None


_FILE, _DIR = (False, False), (True, False)  # ``_kind`` of a regular file, a directory, neither a symlink
_entry = tuple.__new__  # ``Entry(...)`` without NamedTuple's Python-level __new__ per entry


def _kind(st: os.stat_result, link: bool, skips: Skips) -> tuple[bool, bool] | None:
    mode = st.st_mode
    if stat.S_ISDIR(mode):
        return True, link
    if stat.S_ISREG(mode):
        return False, link
    skips.count("not_regular")
    return None


def walk(
    base: Path,
    boundary: Boundary,
    skips: Skips,
    *,
    skip_dirs: frozenset[str] = frozenset(),
    max_depth: int | None = None,
    cancel: threading.Event | None = None,
) -> Iterator[Entry]:
    """Depth-first, names sorted, under the resolved directory ``base``; real directories only are descended
    (up to ``max_depth`` levels), GEODE homes, credential files and anything pointing out are skipped.
    Every entry is checked on its own (its lstat, its identity); what holds for a whole directory (inside
    the roots, under a GEODE home) is worked out once per directory by the boundary. A directory's entries
    and their lstat come from ``listings`` (kept across calls while the directory and the mounts are
    unchanged); every verdict is worked out anew."""
    stack: list[tuple[str, tuple[str, ...]]] = [(str(base), ())]
    gen = listings.generation()  # a directory's entries and their lstat kept while it is unchanged
    while stack:
        here, rel = stack.pop()
        listed = listings.entries(here, gen)
        if listed is None:
            continue
        prefix = here if here.endswith("/") else here + "/"
        below: list[tuple[str, tuple[str, ...]]] = []
        # only the secret files decide here? then what holds for all its entries is asked once
        folder = boundary.secrets.folder(here) if boundary.secrets_only_below(here) else None
        for name, lst in listed:
            if cancel is not None and cancel.is_set():
                return
            if lst is None:  # gone between the listing and its lstat
                continue
            path, parts = prefix + name, (*rel, name)
            if folder is not None:
                kind = _classify_in(path, name, boundary, skips, folder, lst)
            else:
                kind = _classify(path, boundary, skips, lst)
            if kind is None or (kind[0] and name in skip_dirs):
                continue
            is_dir, link = kind
            yield _entry(Entry, (path, parts, is_dir))
            if is_dir and not link and (max_depth is None or len(parts) < max_depth):
                below.append((path, parts))
        stack.extend(reversed(below))
