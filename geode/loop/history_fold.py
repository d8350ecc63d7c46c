"""A fold over a conversation history that only grows between rounds: each round pays for its new messages.

Several things the loop derives from the whole history every round (its token estimate, where the
compaction records are, the skills in use) are left folds: the value after ``history[:n + 1]`` depends only
on the value after ``history[:n]`` and message ``n``. :class:`HistoryFold` remembers, per thread (a turn runs
its rounds on one thread), the last list it folded and the value; when the next list starts with the very
same message objects it folds only the messages after them, otherwise it starts over. The result is the
same as a fold from the start, whatever list is passed.

What it keeps: one copy of the last list per thread and fold (references to messages the history holds
anyway), until that thread folds another list.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from operator import is_
from typing import Generic, TypeVar

from geode.conversation import Message

S = TypeVar("S")


class HistoryFold(Generic[S]):
    """``fold(history)``: ``step`` applied from ``start()`` over ``history``; ``step`` returns the new state
    and must not change the one it is given (states are kept between calls)."""

    def __init__(self, start: Callable[[], S], step: Callable[[S, Message], S]) -> None:
        self._start, self._step = start, step
        self._local = threading.local()
        self.folded = 0  # messages stepped through, all threads (a work count for the tests)

    def __call__(self, history: Sequence[Message]) -> S:
        last: tuple[list[Message], S] | None = getattr(self._local, "last", None)
        if last is not None and len(last[0]) <= len(history) and all(map(is_, last[0], history)):
            begin, state = len(last[0]), last[1]  # the same messages first: fold only the new ones
        else:
            begin, state = 0, self._start()
        step = self._step
        for m in history[begin:]:
            state = step(state, m)
        self.folded += len(history) - begin
        self._local.last = (list(history), state)
        return state
