"""A directory's entries and their ``lstat``, kept across calls while nothing can have changed them: the
directory keeps its device, inode, mtime and ctime (creating, removing, renaming or linking an entry in it
changes them) and this process's mount table is unchanged (a mount over an entry changes what the name is
without touching the directory: ``/proc/self/mountinfo`` polls readable-with-priority after any mount or
unmount in the namespace). The walk (``fs_guard.walk``) then asks one ``stat`` of the directory instead of
a listing and an ``lstat`` per entry; every verdict on the entries is worked out on each call as before.

Kept only when the directory's mtime was at least ``SETTLED_NS`` old when the listing began (an entry made in
the same coarse clock tick as its last change would leave the mtime as it was) and every entry could be
looked at; bounded by ``MAX_ENTRIES`` entries in all (forgotten whole when full)."""

from __future__ import annotations

import os
import select
import threading
import time
from collections.abc import Iterable

from geode.tools.secret_files import SETTLED_NS

MAX_ENTRIES = 8192  # entries kept in all directories together (an os.stat_result each)
MAX_DIR = 1024  # a larger directory is looked at entry by entry as the walk goes, as before, and not kept

Entries = tuple[tuple[str, os.stat_result | None], ...]  # sorted by name; None: gone when looked at
_Signature = tuple[int, int, int, int]

_mu = threading.Lock()
_kept: dict[str, tuple[_Signature, Entries]] = {}
_state = {"entries": 0, "generation": 0, "pid": -1}
_watch: list[tuple[int, select.poll]] = []  # this process's mountinfo descriptor and its poller


def generation() -> int:
    """Ask at the start of a walk: forgets every kept listing when the mount table may have changed since
    the last ask (or cannot be watched); the number a listing made in this walk is kept under."""
    with _mu:
        if _mounts_changed():
            _kept.clear()
            _state["entries"] = 0
            _state["generation"] += 1
        return _state["generation"]


def _mounts_changed() -> bool:
    """Whether the mount table may have changed since the last ask (True when in doubt). Called under _mu."""
    pid = os.getpid()
    if _state["pid"] != pid:  # first ask, or a forked child: the parent's descriptor is not ours to poll
        for fd, _ in _watch:
            os.close(fd)
        _watch.clear()
        _state["pid"] = pid
        try:
            fd = os.open("/proc/self/mountinfo", os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            return True
        poller = select.poll()
        poller.register(fd, select.POLLPRI | select.POLLERR)
        _watch.append((fd, poller))
        return True
    if not _watch:
        return True  # no /proc: nothing is kept
    try:
        return bool(_watch[0][1].poll(0))
    except OSError:
        return True


def entries(d: str, gen: int) -> Iterable[tuple[str, os.stat_result | None]] | None:
    """The sorted names in directory ``d`` with their ``lstat`` (None for one gone meanwhile); None when
    ``d`` cannot be listed. ``gen``: ``generation()`` asked at this walk's start."""
    try:
        st = os.stat(d)
    except (OSError, ValueError):
        st = None
    sig = None if st is None else (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_ctime_ns)
    if sig is not None:
        found = _kept.get(d)
        if found is not None and found[0] == sig:
            return found[1]
    begun = time.time_ns()
    try:
        names = sorted(os.listdir(d))
    except OSError:
        return None
    prefix = d if d.endswith("/") else d + "/"
    if len(names) > MAX_DIR:  # looked at one by one as the walk goes (its cancel checks between): not kept
        return ((name, _lstat(prefix + name)) for name in names)
    listed: list[tuple[str, os.stat_result | None]] = []
    whole = True
    for name in names:
        try:
            listed.append((name, os.lstat(prefix + name)))
        except OSError:
            listed.append((name, None))
            whole = False
    out = tuple(listed)
    if whole and sig is not None and sig[2] < begun - SETTLED_NS:
        _keep(d, sig, out, gen)
    return out


def _lstat(path: str) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except OSError:
        return None


def _keep(d: str, sig: _Signature, out: Entries, gen: int) -> None:
    with _mu:
        if gen != _state["generation"]:  # the mount table changed since this walk began: not kept
            return
        old = _kept.pop(d, None)
        if old is not None:
            _state["entries"] -= len(old[1])
        if _state["entries"] + len(out) > MAX_ENTRIES:
            _kept.clear()
            _state["entries"] = 0
        _kept[d] = (sig, out)
        _state["entries"] += len(out)


def _forked() -> None:
    global _mu
    _mu = threading.Lock()  # a thread of the parent may have held it at the fork


os.register_at_fork(after_in_child=_forked)


def kept() -> int:
    """How many directories are kept (tests)."""
    return len(_kept)
