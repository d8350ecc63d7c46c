"""Fill the free blocks of CPython's partly used small-object pools before a fork, so the child's first
allocations go to fresh pages rather than into holes spread over pages it shares with its parent.

pymalloc serves an allocation from a partly used pool of its size class first. After the zygote's imports
(and the daemon's, before it forks the zygote) those pools are full of holes: freed temporaries between
the frozen objects every child shares. A forked child's first few thousand allocations (objects, dicts,
frames) land in those holes, and each write copies a whole shared page (4 KiB) for a 32-512 byte block.
Filling the holes in the parent with small immortal-by-use ``bytes`` (and one-digit ``int``) objects that
stay alive and untouched costs the parent only what it had already mapped; the children then allocate from
fresh pools, packed. ``sys._debugmallocstats`` says how many blocks each size class has free in its used
pools (~1 ms). The newest pool's untouched tail counts too: filled, it costs the parent up to 16 KiB a size
class once, but a child allocating there writes the pool's header (a shared page) too. So the tails are
taken after each import phase (the daemon before it forks the zygote, the zygote after its imports), and
only the holes (one pool's worth a class left) before each fork of a child: the tails of the pools the
zygote began between two forks would cost it up to ~0.5 MiB a fork. Bounded: at most ``MAX_BYTES`` held
in all (a zygote forks thousands of times in a soak).
"""

from __future__ import annotations

import gc
import os
import sys

MAX_BYTES = 4 << 20  # what the fillers may hold in all, over every fork
POOL_BYTES, POOL_HEADER = 16 << 10, 48  # a 3.12 pymalloc pool (3.11: 4 KiB pools; a smaller tail skipped)
_BYTES_HEADER = 33  # PyBytesObject's size before its data + the trailing NUL (a 64-bit CPython 3.11/3.12)
_held: list[tuple[object, ...]] = []  # the fillers: never touched again
_held_bytes = 0


def free_blocks() -> dict[int, int]:
    """Block size -> free blocks in that size class's partly used pools (``sys._debugmallocstats``)."""
    stats = getattr(sys, "_debugmallocstats", None)
    if stats is None or not hasattr(os, "memfd_create"):
        return {}
    fd = os.memfd_create("pool-stats")  # not a pipe: a full pipe would block the writer, this process
    saved = os.dup(2)
    try:
        sys.stderr.flush()
        os.dup2(fd, 2)
        try:
            stats()
        finally:
            os.dup2(saved, 2)
        size = os.lseek(fd, 0, os.SEEK_END)
        text = os.pread(fd, size, 0)
    finally:
        os.close(saved)
        os.close(fd)
    out: dict[int, int] = {}
    for line in text.decode(errors="replace").splitlines():
        parts = line.split()
        if line.startswith("#"):
            break  # the per-class table is first
        if len(parts) == 5 and all(p.isdigit() for p in parts):
            out[int(parts[1])] = int(parts[4])
    return out


def fill(tails: bool = True) -> int:
    """Take the free blocks of the partly used pools (sizes 32-512); returns how many were taken.
    ``tails=False``: one pool's worth a class left (the newest pool's untouched tail), only the holes."""
    global _held_bytes
    if _held_bytes >= MAX_BYTES:
        return 0
    taken = 0
    try:
        blocks = free_blocks()
    except OSError:
        return 0
    for size, free in sorted(blocks.items()):
        count = free if tails else free - (POOL_BYTES - POOL_HEADER) // size
        if count <= 0 or _held_bytes + size * count > MAX_BYTES:
            continue
        if size == 32:  # a one-digit int: 28 bytes (none is cached at these values)
            base = 1 << 20
            _held.append(tuple(base + i for i in range(count)))
        elif size >= 48:
            n = size - _BYTES_HEADER  # a bytes object of n bytes takes exactly one block of this size
            _held.append(tuple(bytes(n) for _ in range(count)))
        else:
            continue
        _held_bytes += size * count
        taken += count
    if taken:
        gc.freeze()  # the tuples too: no collection in a child visits them
    return taken


__all__ = ["MAX_BYTES", "fill", "free_blocks"]
