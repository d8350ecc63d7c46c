"""A turn's events sent several to a frame (geode/loop/event_batch.py, issue 34): the events the loop
produces back to back go out as one list, always before the loop waits (the model request, a tool), at the
turn's end, and otherwise at most ``hold_s`` after the first held one; the lists joined are the very stream
an unbatched sink gets (same events, same order, same seq)."""

from __future__ import annotations

import threading
import time
from typing import Any

from geode.loop import ListSink
from geode.loop.event_batch import EventBatch, HoldTimer
from geode.protocol.turns import TerminationReason as R
from geode.protocol.turns import TurnEvent, TurnEventKind
from tests.loop.conftest import Rig, tool
from tests.waiting import poll_for

K = TurnEventKind


class Lists:
    """Records each list sent (one frame each), the thread that sent it and when."""

    def __init__(self) -> None:
        self.sent: list[list[TurnEvent]] = []
        self.at: list[float] = []
        self.lock = threading.Lock()

    def __call__(self, events: list[TurnEvent]) -> None:
        with self.lock:
            self.sent.append(list(events))
            self.at.append(time.monotonic())

    def kinds(self) -> list[list[str]]:
        return [[e.kind.value for e in batch] for batch in self.sent]


def _ev(seq: int, kind: TurnEventKind) -> TurnEvent:
    return TurnEvent(session_id="s", turn_id="t", seq=seq, kind=kind)


class _Both:
    """The loop's sink: one batching sink and one plain sink fed the same events (the reference stream)."""

    def __init__(self, batch: EventBatch) -> None:
        self.batch, self.plain = batch, ListSink()

    def emit(self, event: TurnEvent) -> None:
        self.plain.emit(event)
        self.batch.emit(event)


def test_a_tool_round_is_two_frames_and_the_stream_is_unchanged(fake_rig: Rig) -> None:
    """Three tool rounds and an answer: after the turn's opening, each round's events are two lists (up to
    the tool's start: the tool runs next; up to the next round's start: the model is asked next)."""
    lists = Lists()
    both = _Both(EventBatch(lists, HoldTimer(hold_s=30.0)))  # the timer never fires within the test
    provider = fake_rig.script(
        {"tool_calls": [tool("read", "r1", key="a")]},
        {"tool_calls": [tool("read", "r2", key="b")]},
        {"tool_calls": [tool("read", "r3", key="c")]},
        "the answer",
    )
    fake_rig.sink = both  # type: ignore[assignment]
    result = fake_rig.loop(provider).run_turn("s", "t", "go")
    both.batch.close()
    assert result.termination_reason == R.NATURAL
    joined = [e for batch in lists.sent for e in batch]
    assert joined == both.plain.events  # same events, same order, same seq
    assert [e.seq for e in joined] == list(range(1, len(joined) + 1))
    kinds = lists.kinds()
    for batch in kinds:  # a list ends where the loop waits (or the turn ends)
        assert batch[-1] in ("round_start", "tool_start", "text_delta", "termination"), kinds
    rounds = [b for b in kinds if "tool_start" in b]
    assert len(rounds) == 3
    assert all(b[0] == "tokens" and b[-1] == "tool_start" for b in rounds), kinds
    assert kinds[-1][-1] == "termination" and kinds[0][-1] == "round_start", kinds
    # the opening, two per tool round, the answer's text and its end (before: one frame per event)
    assert len(kinds) <= 1 + 2 * 3 + 3, kinds
    assert len(kinds) < len(joined) / 2, kinds


def test_events_before_a_wait_go_out_at_once() -> None:
    lists = Lists()
    batch = EventBatch(lists, HoldTimer(hold_s=30.0))
    batch.emit(_ev(1, K.TOKENS))
    batch.emit(_ev(2, K.CHECKPOINT_SAVED))
    assert lists.sent == []  # held: the loop goes on without waiting
    batch.emit(_ev(3, K.TOOL_START))
    assert lists.kinds() == [["tokens", "checkpoint_saved", "tool_start"]]
    for seq, kind in enumerate((K.TEXT_DELTA, K.LLM_RETRY, K.RETRY_WAIT, K.FALLBACK), 4):
        batch.emit(_ev(seq, kind))  # streamed text, retries: nobody waits for them
        assert lists.sent[-1] == [_ev(seq, kind)]


def test_the_turns_last_events_are_taken_for_its_done_not_sent() -> None:
    """The termination is held (the turn's ``turn.done`` carries it and what came with it: one frame fewer);
    ``take`` hands them over, disarmed, and nothing is held after it."""
    lists = Lists()
    timer = HoldTimer(hold_s=0.2)
    batch = EventBatch(lists, timer)
    batch.emit(_ev(1, K.ROUND_START))
    batch.emit(_ev(2, K.TOKENS))
    batch.emit(_ev(3, K.VERIFY))
    batch.emit(_ev(4, K.TERMINATION))
    assert lists.kinds() == [["round_start"]]
    assert [e.seq for e in batch.take()] == [2, 3, 4]
    assert batch not in timer._due  # disarmed: the timer never sends them too
    time.sleep(0.3)
    batch.close()
    assert lists.kinds() == [["round_start"]] and batch.take() == []


def test_what_is_held_goes_out_within_the_hold_when_the_loop_waits_unannounced() -> None:
    """A slow store save, a hook, a summary call: the timer sends what is held ``hold_s`` after the first."""
    lists = Lists()
    batch = EventBatch(lists, HoldTimer(hold_s=0.05))
    t0 = time.monotonic()
    batch.emit(_ev(1, K.TOKENS))
    batch.emit(_ev(2, K.CHECKPOINT_SAVED))
    poll_for(lambda: lists.sent, 10, what="the held events sent by the timer")
    assert lists.kinds() == [["tokens", "checkpoint_saved"]]
    assert lists.at[0] - t0 >= 0.05
    batch.emit(_ev(3, K.TOOL_END))  # a new burst arms the timer again
    poll_for(lambda: len(lists.sent) == 2, 10, what="the second burst")
    assert lists.kinds()[1] == ["tool_end"]


def test_a_batch_that_went_out_on_its_own_is_disarmed_and_a_new_burst_gets_its_own_hold() -> None:
    lists = Lists()
    timer = HoldTimer(hold_s=0.2)
    batch = EventBatch(lists, timer)
    batch.emit(_ev(1, K.TOKENS))
    assert batch in timer._due
    batch.emit(_ev(2, K.ROUND_START))  # sent: the timer forgets it (it will not cut the next burst short)
    assert batch not in timer._due
    t0 = time.monotonic()
    batch.emit(_ev(3, K.TOOL_END))
    assert timer._due[batch] >= t0 + 0.2
    poll_for(lambda: len(lists.sent) == 2, 10)
    assert lists.kinds() == [["tokens", "round_start"], ["tool_end"]]
    assert lists.at[1] - t0 >= 0.2


def test_close_sends_the_rest_and_a_full_batch_goes_out() -> None:
    lists = Lists()
    batch = EventBatch(lists, HoldTimer(hold_s=30.0), most=3)
    for seq in range(1, 5):
        batch.emit(_ev(seq, K.CHECKPOINT_SAVED))
    assert [len(b) for b in lists.sent] == [3]
    batch.close()
    assert [len(b) for b in lists.sent] == [3, 1]
    batch.close()  # nothing held: nothing sent
    assert len(lists.sent) == 2


def test_a_failed_send_never_fails_the_turn() -> None:
    def broken(events: list[Any]) -> None:
        raise RuntimeError("bus gone")

    batch = EventBatch(broken, HoldTimer(hold_s=30.0))
    batch.emit(_ev(1, K.TOKENS))
    batch.emit(_ev(2, K.ROUND_START))  # logged and dropped, as a single event's failure was
