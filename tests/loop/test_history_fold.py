"""HistoryFold: the same value as a fold from the start whatever lists it is given, and a grown history costs
its new messages only (folded and copied), not a copy of the whole list a call."""

from __future__ import annotations

import random

from geode.conversation import Message
from geode.loop.history_fold import HistoryFold


def _fold() -> HistoryFold[tuple[str, ...]]:
    return HistoryFold(lambda: (), lambda s, m: (*s, m.text))


def _msgs(prefix: str, n: int) -> list[Message]:
    return [Message.user_text(f"{prefix}{i}") for i in range(n)]


def test_grown_history_copies_and_folds_only_its_new_messages() -> None:
    fold = _fold()
    history = _msgs("m", 1000)
    assert fold(history) == tuple(m.text for m in history)
    folded, copied = fold.folded, fold.copied
    history += _msgs("n", 2)  # the history list itself grows, as a turn's does
    assert fold(history) == tuple(m.text for m in history)
    assert (fold.folded - folded, fold.copied - copied) == (2, 2)
    assert fold(list(history)) == tuple(m.text for m in history)  # a copy of it: nothing new
    assert (fold.folded - folded, fold.copied - copied) == (2, 2)


def test_same_value_as_a_fold_from_the_start_for_any_lists() -> None:
    rng = random.Random(7)
    fold = _fold()
    history = _msgs("h", 5)
    other = _msgs("o", 3)  # another session's list
    for step in range(400):
        op = rng.randrange(5)
        if op == 0:
            history.append(Message.user_text(f"a{step}"))
        elif op == 1 and history:  # a view that changed near its end (compaction's elision)
            view = [*history[: max(0, len(history) - rng.randrange(1, 4))], Message.user_text(f"v{step}")]
            assert fold(view) == tuple(m.text for m in view)
        elif op == 2:
            other = [*other, Message.user_text(f"b{step}")]
            assert fold(other) == tuple(m.text for m in other)
        elif op == 3 and len(history) > 2:  # replaced in place near its start (a rewrite): not a prefix
            history[1] = Message.user_text(f"r{step}")
        elif op == 4:
            history = [Message.user_text(m.text) for m in history]  # equal messages, other objects
        assert fold(history) == tuple(m.text for m in history)
        assert fold(tuple(history)) == tuple(m.text for m in history)
