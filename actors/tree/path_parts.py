"""Paths without immortal names: CPython 3.12's pathlib interns every part of every path it parses
(``sys.intern`` in ``PurePath._parse_path``), and 3.12 makes every interned string immortal, so a long-running
process that names a file or a directory after each call, turn or session kept every such name for good
(~120 bytes each; the executor's per-call files: +0.3-0.4 MiB per 1,000 turns in the soak, unbounded).

:func:`install` gives pathlib a ``sys`` whose ``intern`` returns its argument (every other name is the real
``sys``'s), on 3.12 only: 3.11 frees an interned string with its last reference, and 3.13 made them mortal
again. A path's parts are then plain strings, freed with the path. Each process of the tree calls it before it
builds paths (the daemon, an exec'd zygote or child; a forked one inherits it).
"""

from __future__ import annotations

import os
import sys
import types

IMMORTAL_REFCOUNT = 1 << 30  # 3.12 reports an immortal object's reference count as 2**32 - 1


class _SysWithoutIntern(types.ModuleType):
    """``sys`` for pathlib: the same module but for ``intern``."""

    def __getattr__(self, name: str) -> object:
        return getattr(sys, name)

    @staticmethod
    def intern(string: str) -> str:
        return string


def install() -> bool:
    """Patch pathlib once (3.12); True when this process's pathlib no longer interns."""
    import pathlib

    current = getattr(pathlib, "sys", None)
    if isinstance(current, _SysWithoutIntern):
        return True
    if sys.version_info[:2] != (3, 12) or current is not sys:
        return False
    pathlib.sys = _SysWithoutIntern("sys")  # type: ignore[attr-defined]
    return True


def immortal_parts() -> bool:
    """Whether a path this process parses now keeps its parts for good (a live probe: a fresh name's
    reference count; False on 3.11 and 3.13, and on 3.12 once :func:`install` ran)."""
    import pathlib

    name = pathlib.PurePosixPath(f"/geode-probe/{os.urandom(8).hex()}").name
    return sys.getrefcount(name) >= IMMORTAL_REFCOUNT


__all__ = ["immortal_parts", "install"]
