"""A turn's fixed work in a worker that runs many sessions: what one session's turn costs does not grow with
the other sessions' histories the process keeps."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, overload

from geode.providers.identity_memo import common_prefix


class _Counted(Sequence[Any]):
    """A sequence that counts the items read from it."""

    def __init__(self, items: list[Any]) -> None:
        self.items, self.reads = items, 0

    def __len__(self) -> int:
        return len(self.items)

    @overload
    def __getitem__(self, i: int) -> Any: ...
    @overload
    def __getitem__(self, i: slice) -> Sequence[Any]: ...
    def __getitem__(self, i: int | slice) -> Any:
        if isinstance(i, slice):
            self.reads += len(self.items[i])
            return self.items[i]
        self.reads += 1
        return self.items[i]


def test_another_sessions_list_is_told_apart_by_its_first_item_not_walked() -> None:
    mine, theirs = [object() for _ in range(300)], [object() for _ in range(400)]
    a, b = _Counted(mine), _Counted(theirs)
    assert common_prefix(a, b) == 0
    assert a.reads + b.reads <= 4  # was 2 x 300: a fold keeps the lists of several sessions
    assert common_prefix(mine, theirs) == 0 and common_prefix(theirs, mine) == 0
    # a list of the same session is still compared item by item: the shared head is counted exactly
    changed = [*mine[:120], object(), *mine[121:]]
    assert common_prefix(mine, changed) == 120 and common_prefix(changed, mine) == 120
    assert common_prefix(mine, [*mine, object()]) == 300
    assert common_prefix([], theirs) == 0 and common_prefix(mine, []) == 0
