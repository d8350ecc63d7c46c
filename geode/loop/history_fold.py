"""A fold over a conversation history that only grows between rounds: each round pays for its new messages.

Several things the loop derives from the whole history every round (its token estimate, where the
compaction records are, the skills in use) are left folds: the value after ``history[:n + 1]`` depends only
on the value after ``history[:n]`` and message ``n``. :class:`HistoryFold` remembers, per thread (a turn runs
its rounds on one thread), the last few lists it folded and the value after each of their messages; the
next list is folded from the end of the longest run of leading messages (the very same objects) it shares
with one of them: a grown history costs its new messages, a compacted view the messages that changed near
its end. The result is the same as a fold from the start, whatever list is passed.

What it keeps: per thread and fold, copies of the last ``lists`` lists (references to messages the history
holds anyway) and one state per message, until that thread folds other lists.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Generic, TypeVar

from geode.conversation import Message
from geode.providers.identity_memo import common_prefix

S = TypeVar("S")


class HistoryFold(Generic[S]):
    """``fold(history)``: ``step`` applied from ``start()`` over ``history``; ``step`` returns the new state
    and must not change the one it is given (states are kept between calls)."""

    def __init__(self, start: Callable[[], S], step: Callable[[S, Message], S], *, lists: int = 4) -> None:
        self._start, self._step, self._lists = start, step, lists
        self._local = threading.local()
        self.folded = 0  # messages stepped through, all threads (a work count for the tests)

    def __call__(self, history: Sequence[Message]) -> S:
        """The fold resumes after the longest run of leading messages ``history`` shares with one of the
        last few lists this thread folded (the history, and views derived from it, alternate)."""
        kept: list[tuple[list[Message], list[S]]] = self._local.__dict__.setdefault("kept", [])
        begin, states = 0, None
        for seen, seen_states in kept:
            k = common_prefix(seen, history)
            if k > begin or states is None:
                begin, states = k, seen_states
        states = states[: begin + 1] if states is not None else [self._start()]
        state, step = states[-1], self._step
        for m in history[begin:]:
            state = step(state, m)
            states.append(state)
        self.folded += len(history) - begin
        kept.insert(0, (list(history), states))
        del kept[self._lists :]
        return state
