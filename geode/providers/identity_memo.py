"""Values computed once per live object: a message's token estimate, its wire param, a plan's tool schemas.

The conversation's messages and a turn's plan are frozen pydantic models that live as long as the turn's
history holds them. What the loop and the adapters derive from one of them (its size, its JSON on the wire)
is the same every round, so it is computed when first asked and kept beside the object — keyed by the
object itself (its identity, checked through a weak reference), dropped when the object is collected.
Never by value: two equal messages are two entries, and ``model_copy`` makes a new object with no entry.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Sequence
from operator import is_
from typing import Any, Generic, TypeVar

V = TypeVar("V")


class IdentityMemo(Generic[V]):
    """``memo.get(obj, compute)``: ``compute(obj)`` the first time for this very object, then the kept value.

    Thread-safe without a lock (single dict operations under the GIL; a lock could deadlock when a weak
    reference's callback runs inside it): two threads asking at once may both compute (the functions are
    pure), one value is kept. An object that does not take weak references is computed every time.
    An id is only reused after its object is freed, which is after the object's callback has run."""

    def __init__(self) -> None:
        self._entries: dict[int, tuple[weakref.ref[Any], V]] = {}

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, obj: Any, compute: Callable[[Any], V]) -> V:
        key = id(obj)
        entry = self._entries.get(key)
        if entry is not None and entry[0]() is obj:
            return entry[1]
        value = compute(obj)
        try:
            ref = weakref.ref(obj, self._forget(key))
        except TypeError:
            return value
        self._entries[key] = (ref, value)
        return value

    def _forget(self, key: int) -> Callable[[weakref.ref[Any]], None]:
        entries = self._entries

        def forget(ref: weakref.ref[Any]) -> None:
            entry = entries.get(key)
            if entry is not None and entry[0] is ref:  # not a newer object that reuses the id
                entries.pop(key, None)

        return forget


def common_prefix(a: Sequence[Any], b: Sequence[Any]) -> int:
    """How many leading items ``a`` and ``b`` share, compared in C, not per item in Python: what a list
    derived from the last one (grown, or changed near its end) has in common with it.

    The usual case (``b`` is ``a`` grown, both lists or both tuples) is one comparison of ``a`` with ``b``'s
    head, which checks each item's identity first (~4 ns an item; ``map(is_, ...)`` took ~20): a head of
    the same objects, or of equal ones, is shared (an equal message encodes and folds as the one it equals).
    Otherwise the very same objects are counted; a list of other objects from its first item on (another
    session's) costs one check, not a pass over the shorter list."""
    n = len(a)
    if n <= len(b) and (not n or a[n - 1] is b[n - 1]):
        head = b if len(b) == n else b[:n]
        if type(head) is type(a) and (type(a) is list or type(a) is tuple):
            if head == a:
                return n
        elif all(map(is_, a, b)):
            return n  # the usual case for other sequences: no list of flags built
    if not n or not b or a[0] is not b[0]:
        return 0  # another conversation's list (a fold keeps several): nothing shared, no list of flags
    same = list(map(is_, a, b))
    try:
        return same.index(False)
    except ValueError:
        return len(same)
