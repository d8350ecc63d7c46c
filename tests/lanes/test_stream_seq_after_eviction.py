"""A session's event numbers keep increasing after lanes' replay buffer dropped it (LRU of 256 sessions).

A client drops an event whose seq is not above the last it saw (a repeat): a chat left open while other
sessions pushed its stream out of the buffer must still see its next turn, and a replay must not claim to be
complete for events the buffer no longer holds.
"""

from __future__ import annotations

from geode.lanes.stream import StreamBuffer


def _fill(buf: StreamBuffer, session: str, n: int) -> list[int]:
    return [buf.append(session, "t-1", "text", {"i": i}).seq for i in range(n)]


def test_a_dropped_sessions_next_events_are_numbered_above_what_its_client_saw() -> None:
    buf = StreamBuffer(max_sessions=2, start_ms=1)
    seen = _fill(buf, "s-chat", 3)
    _fill(buf, "s-2", 2)
    _fill(buf, "s-3", 2)  # s-chat's events leave the buffer
    assert buf.since("s-chat", 0) == ([], False)
    nxt = buf.append("s-chat", "t-2", "turn_started", {}).seq
    assert nxt > max(seen)  # was 1_000_001 again: the open chat took it for a repeat and dropped it


def test_a_replay_of_a_dropped_session_is_complete_only_if_the_client_saw_its_last_event() -> None:
    buf = StreamBuffer(max_sessions=1, start_ms=1)
    first, *_rest, last = _fill(buf, "s-1", 3)
    _fill(buf, "s-2", 1)  # s-1's events dropped
    assert buf.since("s-1", last) == ([], True)  # nothing was missed
    assert buf.since("s-1", first) == ([], False)  # two events are gone: lanes adds the durable outcomes


def test_a_session_forgotten_altogether_is_never_vouched_for_and_still_numbers_upwards() -> None:
    buf = StreamBuffer(max_sessions=1, max_seq_sessions=1, start_ms=1)
    seen = _fill(buf, "s-1", 2)
    _fill(buf, "s-2", 1)
    _fill(buf, "s-3", 1)  # s-1 forgotten: neither its events nor its last seq are kept
    assert buf.since("s-1", max(seen)) == ([], False)
    assert buf.append("s-1", "t-2", "text", {}).seq > max(seen)


def test_a_live_session_numbers_as_before() -> None:
    buf = StreamBuffer(start_ms=1)
    a, b = _fill(buf, "s-1", 2)
    assert (a, b) == (1_000_001, 1_000_002)
    assert buf.since("s-1", a)[1] and buf.since("s-1", 0) == (buf.since("s-1", 0)[0], False)
