"""A turn's events sent several to a frame (geode/loop/event_batch.py, issue 34): the events the loop
produces back to back go out as one list, always before the loop waits for the model, when a tool runs
longer than ``TOOL_HOLD_S`` (a fast tool's events ride the next round's list), at the turn's end, and
otherwise at most ``hold_s`` after the first held one; the lists joined are the very stream an unbatched
sink gets (same events, same order, same seq)."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from geode.loop import ListSink
from geode.loop import events as loop_events
from geode.loop.event_batch import EventBatch, HoldTimer, quiet_tools
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


def _ev(seq: int, kind: TurnEventKind, **data: Any) -> TurnEvent:
    return TurnEvent(session_id="s", turn_id="t", seq=seq, kind=kind, data=data)


class _Both:
    """The loop's sink: one batching sink and one plain sink fed the same events (the reference stream)."""

    def __init__(self, batch: EventBatch) -> None:
        self.batch, self.plain = batch, ListSink()

    def emit(self, event: TurnEvent) -> None:
        self.plain.emit(event)
        self.batch.emit(event)

    def flush(self) -> None:
        self.batch.flush()


def test_a_fast_tool_round_is_one_frame_and_the_stream_is_unchanged(
    fake_rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Three tool rounds and an answer: after the turn's opening, each round's events are one list, up to the
    next round's start (the model is asked next): the tool answered within the hold, so its ``tool_start``
    and ``tool_end`` ride that list (before: two lists a round, one ending with the ``tool_start``)."""
    monkeypatch.setattr(loop_events, "TOOL_HOLD_S", 30.0)  # every tool is fast here, however loaded
    lists = Lists()
    both = _Both(EventBatch(lists, HoldTimer(hold_s=30.0)))  # the timer never fires within the test
    both.batch.quiet = quiet_tools(fake_rig.plan.specs)
    assert both.batch.quiet == {"read", "fail"}  # read-only, no approval; not "write"
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
    for batch in kinds:  # a list ends where the loop waits for the model (or the turn ends)
        assert batch[-1] in ("round_start", "text_delta", "termination"), kinds
    rounds = [b for b in kinds if "tool_start" in b]
    assert len(rounds) == 3
    want = ["tokens", "checkpoint_saved", "tool_start", "tool_end", "round_start"]
    assert all(b == want for b in rounds), kinds
    assert kinds[-1][-1] == "termination" and kinds[0][-1] == "round_start", kinds
    # the opening, one per tool round, the answer's text and its end
    assert len(kinds) <= 1 + 3 + 3, kinds


def _slow(seconds: float) -> Any:
    def read(args: dict[str, Any]) -> dict[str, Any]:
        time.sleep(seconds)
        return {"value": f"read:{args.get('key', '')}"}

    return read


@pytest.mark.parametrize("calls", [1, 2])
def test_a_slow_tools_start_is_sent_by_the_waiting_turn_within_the_hold(fake_rig: Rig, calls: int) -> None:
    """A tool still running after ``TOOL_HOLD_S``: the turn's thread (not the hold timer: it would fire only
    after 30 s here) sends what is held, its ``tool_start`` last, long before the tool ends. One call is
    waited on alone (one_call.await_one), two concurrently (batch._await)."""
    lists = Lists()
    both = _Both(EventBatch(lists, HoldTimer(hold_s=30.0)))
    both.batch.quiet = quiet_tools(fake_rig.plan.specs)
    fake_rig.handlers["read"] = _slow(0.6)
    reply = {"tool_calls": [tool("read", f"r{i}", key=str(i)) for i in range(calls)]}
    fake_rig.sink = both  # type: ignore[assignment]
    t0 = time.monotonic()
    result = fake_rig.loop(fake_rig.script(reply, "done")).run_turn("s", "t", "go")
    both.batch.close()
    assert result.termination_reason == R.NATURAL
    kinds = lists.kinds()
    starts = [i for i, b in enumerate(kinds) for k in b if k == "tool_start"]
    assert len(starts) == calls, kinds
    for i in starts:  # each start sent on its own list, long before the tool ended
        assert kinds[i][-1] == "tool_start" and "tool_end" not in kinds[i], kinds
        assert lists.at[i] - t0 < 0.5, "a slow tool's start waited for its end"
    joined = [e for batch in lists.sent for e in batch]
    assert joined == both.plain.events


def test_events_before_a_wait_go_out_at_once() -> None:
    lists = Lists()
    batch = EventBatch(lists, HoldTimer(hold_s=30.0))
    batch.quiet = frozenset({"read_file"})
    batch.emit(_ev(1, K.TOKENS))
    batch.emit(_ev(2, K.CHECKPOINT_SAVED))
    assert lists.sent == []  # held: the loop goes on without waiting
    batch.emit(_ev(3, K.TOOL_START, name="read_file"))  # quiet: held (the turn's thread sends it if slow)
    assert lists.sent == []
    batch.emit(_ev(4, K.TOOL_END, name="read_file"))
    batch.emit(_ev(5, K.ROUND_START))  # the model request follows
    assert lists.kinds() == [["tokens", "checkpoint_saved", "tool_start", "tool_end", "round_start"]]
    batch.emit(_ev(6, K.TOKENS))
    batch.emit(_ev(7, K.TOOL_START, name="write_file"))  # may be asked for: out before any approval request
    assert lists.kinds()[1:] == [["tokens", "tool_start"]]
    lists.sent.clear()
    for seq, kind in enumerate((K.TEXT_DELTA, K.LLM_RETRY, K.RETRY_WAIT, K.FALLBACK), 8):
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


def test_quiet_tools_are_the_read_only_ones_nobody_can_be_asked_for() -> None:
    """A tool whose call may make lanes send an approval request keeps its tool_start unheld: the request
    is numbered as it reaches lanes and must not pass the start (the CLI shows the call, then the prompt)."""
    from geode.tools.builtin.catalogue import BUILTIN_SPECS

    quiet = quiet_tools(BUILTIN_SPECS)
    assert {"read_file", "list_dir", "glob_files", "grep_files"} <= quiet
    assert not quiet & {"web_fetch", "write_file", "edit_file", "run_bash", "send_message", "delegate_task"}
    hooked = quiet_tools(BUILTIN_SPECS, lambda name: name == "read_file")  # a PreToolUse hook may say "ask"
    assert "read_file" not in hooked and "glob_files" in hooked
