"""Counts of named kinds of work per process, for the regression guards (docs/testing.md, "Counting work").

With ``GEODE_WORK_TALLY=<dir>`` in the environment, every process that imports this module counts the work
it does at the choke points (frames decoded and encoded per message type, pydantic validations at the bus
boundary, thread hand-offs, store round trips, LMDB write transactions, checkpoint saves, timeline appends)
into ``<dir>/<pid>.tally``: a small memory-mapped file (a header naming the process role, a table of counter
names, an array of int64 values) that :func:`read_tallies` reads at any time, while the process runs or
after it has exited. Unset, :func:`count` is a function that does nothing.

A counter is a ``kind`` and an optional ``detail`` (usually the message type); counting both bumps the
kind's total and the ``kind:detail`` counter, so a reader can take the totals or subtract the background
traffic (heartbeats, status polls) by type. Counters count work, never time: a guard that compares them is
deterministic.

Fork-safe: a forked child opens its own file on its first count (``os.register_at_fork``), it never counts
into its parent's. An increment is a dict look-up and one or two in-place adds on a memoryview (no Python
frame between the read and the write, so the GIL keeps it whole).
"""

from __future__ import annotations

import mmap
import os
import struct
import sys
import threading
from collections.abc import Callable
from pathlib import Path

ENV = "GEODE_WORK_TALLY"

# the kinds counted at the choke points: keep these names stable (the guards and docs read them)
FRAME_DECODED = "frame.decoded"  # detail: message type; a frame unpacked and validated by its receiver
FRAME_ENCODED = "frame.encoded"  # detail: message type
FRAME_BIN_WALK = "frame.bin_walk"  # a received frame walked for its bin values (codec.decode_raw)
VALIDATION = "validation"  # detail: the message type whose envelope or body was validated
VALIDATION_REPLY = "validation.reply"  # detail: the message type whose reply body was validated
HANDOFF_POOL = "handoff.pool"  # a job queued for a handler thread (HandlerPool.submit)
HANDOFF_POST = "handoff.post"  # an op posted from another thread to the bus thread (PollLoop._post)
HANDOFF_WAKE = "handoff.wake"  # an eventfd write waking the bus thread (PollLoop._wake)
HANDOFF_REPLY = "handoff.reply"  # a reply handed from the bus thread to the caller waiting for it
STORE_CALL = "store.call"  # detail: message type; a client's round trip to the store (StoreClient._call)
LMDB_WRITE_TXN = "lmdb.write_txn"  # detail: who wrote (group, turns, env); one committed write transaction
LMDB_WRITE_OP = "lmdb.write_op"  # one operation inside a group-commit transaction
CHECKPOINT_SAVE = "checkpoint.save"  # a checkpoint save applied by the store
TIMELINE_APPEND = "timeline.append"  # a timeline append applied by the store
THREAD_START = "thread.start"  # a thread started (threading.Thread.start, counted only while the tally is on)

_MAGIC = b"GEODETLY"
_VERSION = 1
_SLOTS = 1024
_NAME_BYTES = 64
_ROLE_BYTES = 64
_HEAD = struct.Struct("<8sII")  # magic, version, slots
_USED = struct.Struct("<I")  # how many names are registered (written after the name itself)
_USED_AT = _HEAD.size
_ROLE_AT = 32
_NAMES_AT = _ROLE_AT + _ROLE_BYTES
_VALUES_AT = _NAMES_AT + _SLOTS * _NAME_BYTES
_SIZE = _VALUES_AT + _SLOTS * 8
_OVERFLOW = "tally.overflow"  # where counts go once every slot is taken


class _Tally:
    """This process's open tally file (or a sink when it cannot be written)."""

    def __init__(self, directory: str) -> None:
        self.lock = threading.Lock()
        self.slots: dict[tuple[str, str | None], tuple[int, ...]] = {}
        self.index: dict[str, int] = {}
        self.mm: mmap.mmap | None = None
        try:
            os.makedirs(directory, exist_ok=True)
            path = os.path.join(directory, f"{os.getpid()}.tally")
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
            try:
                os.ftruncate(fd, _SIZE)
                self.mm = mmap.mmap(fd, _SIZE)
            finally:
                os.close(fd)
        except OSError as exc:
            print(f"work tally off in pid {os.getpid()}: {directory}: {exc}", file=sys.stderr)
        buf: memoryview = memoryview(self.mm) if self.mm is not None else memoryview(bytearray(_SIZE))
        self.buf = buf
        self.values = buf[_VALUES_AT:_SIZE].cast("q")
        _HEAD.pack_into(buf, 0, _MAGIC, _VERSION, _SLOTS)
        self.set_role(_default_role())

    def set_role(self, role: str) -> None:
        raw = role.encode("utf-8", "replace")[:_ROLE_BYTES]
        self.buf[_ROLE_AT : _ROLE_AT + _ROLE_BYTES] = raw.ljust(_ROLE_BYTES, b"\0")

    def register(self, kind: str, detail: str | None) -> tuple[int, ...]:
        with self.lock:
            idx = self.slots.get((kind, detail))
            if idx is None:
                names = [kind] if detail is None else [kind, f"{kind}:{detail}"]
                idx = tuple(self._slot(name) for name in names)
                self.slots[(kind, detail)] = idx
            return idx

    def _slot(self, name: str) -> int:
        i = self.index.get(name)
        if i is not None:
            return i
        used = len(self.index)
        if used >= _SLOTS - 1:  # the last slot is the overflow counter
            return self._overflow()
        raw = name.encode("utf-8", "replace")[:_NAME_BYTES]
        at = _NAMES_AT + used * _NAME_BYTES
        self.buf[at : at + _NAME_BYTES] = raw.ljust(_NAME_BYTES, b"\0")
        _USED.pack_into(self.buf, _USED_AT, used + 1)  # a reader sees the name before it counts
        self.index[name] = used
        return used

    def _overflow(self) -> int:
        i = self.index.get(_OVERFLOW)
        if i is None:
            i = _SLOTS - 1
            at = _NAMES_AT + i * _NAME_BYTES
            self.buf[at : at + _NAME_BYTES] = _OVERFLOW.encode().ljust(_NAME_BYTES, b"\0")
            self.index[_OVERFLOW] = i
        return i


_state: _Tally | None = None
_here = threading.local()  # the message type this thread last encoded, decoded or validated
_open_lock = threading.Lock()
_role: str | None = None


def _default_role() -> str:
    if _role is not None:
        return _role
    child = os.environ.get("GEODE_CHILD_NAME")
    if child:
        return child
    return os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else "python"


def _open() -> _Tally:
    global _state
    with _open_lock:
        if _state is None:
            _state = _Tally(os.environ.get(ENV, ""))
        return _state


def _count(kind: str, detail: str | None = None, n: int = 1) -> None:
    s = _state if _state is not None else _open()
    idx = s.slots.get((kind, detail))
    if idx is None:
        idx = s.register(kind, detail)
    v = s.values
    v[idx[0]] += n
    if len(idx) > 1:
        v[idx[1]] += n


def _frame(kind: str, type_: str) -> None:
    _here.type = type_
    _count(kind, type_)


def _handoff(kind: str) -> None:
    _count(kind, getattr(_here, "type", None) or "-")


def _noop(kind: str, detail: str | None = None, n: int = 1) -> None:
    return None


def _forget_after_fork() -> None:
    global _state, _role
    # the child's first count opens <dir>/<its pid>.tally; the parent's map stays the parent's
    _state, _role = None, None


ON = bool(os.environ.get(ENV))
count: Callable[..., None] = _count if ON else _noop
"""``count(kind, detail=None, n=1)``: add ``n`` to ``kind`` (and to ``kind:detail``); a no-op when off."""
frame: Callable[[str, str], None] = _frame if ON else _noop
"""``frame(kind, message_type)``: count work on one message, and remember its type as this thread's current
message (what the thread's next hand-off is counted under)."""
handoff: Callable[[str], None] = _handoff if ON else _noop
"""``handoff(kind)``: count a thread hand-off under ``kind`` and ``kind:<the thread's current message type>``
(``-`` when the thread has handled none), so a guard can leave out the hand-offs of background traffic."""

if ON:
    os.register_at_fork(after_in_child=_forget_after_fork)


def _count_thread_starts() -> None:
    """Count every ``threading.Thread.start`` of this process (a thread per turn or call is work too)."""
    start = threading.Thread.start

    def counted_start(self: threading.Thread) -> None:
        _count(THREAD_START)
        start(self)

    threading.Thread.start = counted_start  # type: ignore[method-assign]


if ON:
    _count_thread_starts()


def set_role(role: str) -> None:
    """Name this process in its tally file's header (a child's role; default: ``GEODE_CHILD_NAME``)."""
    global _role
    _role = role
    if ON:
        (_state or _open()).set_role(role)


# reading -----------------------------------------------------------------------------------------------


def read_file(path: Path) -> tuple[str, dict[str, int]]:
    """``(role, {counter name: value})`` of one tally file (counters never bumped are left out)."""
    data = path.read_bytes()
    if len(data) < _SIZE:
        raise ValueError(f"{path}: not a work tally (too short)")
    magic, version, slots = _HEAD.unpack_from(data, 0)
    if magic != _MAGIC or version != _VERSION or slots != _SLOTS:
        raise ValueError(f"{path}: not a work tally of version {_VERSION}")
    (used,) = _USED.unpack_from(data, _USED_AT)
    role = data[_ROLE_AT : _ROLE_AT + _ROLE_BYTES].rstrip(b"\0").decode("utf-8", "replace")
    values = memoryview(data)[_VALUES_AT:_SIZE].cast("q")
    out: dict[str, int] = {}
    for i in [*range(min(used, _SLOTS - 1)), _SLOTS - 1]:
        at = _NAMES_AT + i * _NAME_BYTES
        name = data[at : at + _NAME_BYTES].rstrip(b"\0").decode("utf-8", "replace")
        if name and values[i]:
            out[name] = values[i]
    return role, out


def read_tallies(directory: Path | str) -> dict[int, dict[str, int]]:
    """``{pid: {counter name: value}}`` of every process that counted into ``directory``."""
    return {pid: counts for pid, (_role_, counts) in read_all(directory).items()}


def read_roles(directory: Path | str) -> dict[int, str]:
    """``{pid: role}`` of every tally file in ``directory``."""
    return {pid: role for pid, (role, _counts) in read_all(directory).items()}


def read_all(directory: Path | str) -> dict[int, tuple[str, dict[str, int]]]:
    """``{pid: (role, counts)}``; a file that is not a tally (or vanished) is skipped."""
    out: dict[int, tuple[str, dict[str, int]]] = {}
    for path in sorted(Path(directory).glob("*.tally")):
        try:
            out[int(path.stem)] = read_file(path)
        except (ValueError, OSError):
            continue
    return out


def by_role(directory: Path | str) -> dict[str, dict[str, int]]:
    """Counts summed per role (a restarted child's incarnations add up under its name)."""
    out: dict[str, dict[str, int]] = {}
    for role, counts in read_all(directory).values():
        total = out.setdefault(role, {})
        for name, n in counts.items():
            total[name] = total.get(name, 0) + n
    return out
