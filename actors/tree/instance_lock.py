"""Single-instance guard for ``geode serve``: ``fcntl.flock`` on ``GeodeHome.lock_file`` (not the socket)."""

from __future__ import annotations

import contextlib
import fcntl
import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # a path or its string (`geode ask` checks the lock before it imports pathlib)
    from pathlib import Path

SERVE = "geode serve"  # the holder of a daemon's lock; other holders run an in-process tree (`geode mcp`)


class InstanceLock:
    """Held for the life of the supervisor; the file also records its pid and which command holds it (a line
    each). Released by the kernel on death."""

    def __init__(self, path: Path | str) -> None:
        self.path = path
        self._fd: int | None = None

    def acquire(self, holder: str = SERVE) -> bool:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n{holder}\n".encode())
        self._fd = fd
        return True

    def release(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, 0)
            os.close(self._fd)
            self._fd = None

    def is_held(self) -> bool:
        """True when some process (this one included) holds the lock."""
        if self._fd is not None:
            return True
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        finally:
            os.close(fd)
        return False

    def _lines(self) -> list[str]:
        try:
            with open(self.path, encoding="utf-8") as f:
                return f.read().split("\n")
        except OSError:
            return []

    def holder_pid(self) -> int | None:
        first = (self._lines() or [""])[0].strip()
        return int(first) if first.isdigit() else None

    def holder(self) -> str:
        """Which command holds the lock: ``geode serve`` (also for a file written before holders were named)
        or the command running an in-process tree (``geode mcp``, ``geode --repl``)."""
        lines = self._lines()
        return lines[1].strip() if len(lines) > 1 and lines[1].strip() else SERVE
