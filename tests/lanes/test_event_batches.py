"""Several turn events in one frame over real buses (issue 34): a worker's ``turn.events`` is relayed by lanes
as one ``origin.events`` frame, each event numbered, reordered, deduplicated and fenced as if it came alone;
control takes such a frame on its bus thread and handles its events in order.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from actors.bus import Bus
from actors.control import start_control
from actors.lanes import LanesHandle, start_lanes_actor
from geode.home import GeodeHome
from geode.lanes.queue import LaneQueue
from geode.lanes.records import MemoryTurnStore
from geode.lanes.stream import each_event
from geode.protocol import lanes as lanes_msg
from geode.protocol import runtime, turns
from geode.protocol.dispatch import Dispatch
from geode.protocol.transport import Request
from tests.waiting import poll_for

K = turns.TurnEventKind


@dataclass
class Rig:
    lanes: LanesHandle
    frames: list[tuple[str, list[dict[str, Any]]]]  # (message type, its events) as the origin got them
    worker: Bus

    def events(self) -> list[dict[str, Any]]:
        return [e for _, evs in self.frames for e in evs]


@pytest.fixture
def rig(tmp_path: Path) -> Iterator[Rig]:
    """lanes (the real actor) on a bus, an origin that records each frame, a worker; turn t-1 runs."""
    home = GeodeHome(tmp_path / "h").ensure()
    lanes_bus = Bus("lanes", 1, home).start()
    lanes = start_lanes_actor(MemoryTurnStore(), lanes_bus.transport, queue=LaneQueue(global_cap=2))
    lanes_bus.serve("lanes", lanes)
    frames: list[tuple[str, list[dict[str, Any]]]] = []
    runs: list[turns.TurnRun] = []

    def one(b: lanes_msg.StreamEvent, r: Request) -> None:
        frames.append((lanes_msg.ORIGIN_EVENT, [b.model_dump()]))

    def many(b: lanes_msg.StreamEvents, r: Request) -> None:
        frames.append((lanes_msg.ORIGIN_EVENTS, [e.model_dump() for e in b.events]))

    def on_run(b: turns.TurnRun, r: Request) -> turns.TurnRunAccepted:
        runs.append(b)
        return turns.TurnRunAccepted(worker="loop-1")

    origin = Bus("origin", 1, home).start()
    origin.connect_peer(
        "lanes", Dispatch("test origin", {lanes_msg.ORIGIN_EVENT: one, lanes_msg.ORIGIN_EVENTS: many})
    )
    worker = Bus("loop-1", 1, home).start()
    worker.connect_peer("lanes", Dispatch("test worker", {turns.TURN_RUN: on_run}))
    try:
        poll_for(lambda: {"origin", "loop-1"} <= set(lanes_bus.peers("lanes")), 10, what="both peers' hellos")
        worker.transport.call("lanes", turns.WORKER_READY, turns.WorkerReady(worker="loop-1", incarnation=1))
        sub = lanes_msg.Submit(turn_id="t-1", session_id="s-1", origin="origin", input={"text": "hi"})
        origin.transport.call("lanes", lanes_msg.SUBMIT, sub)
        poll_for(lambda: runs, 10, what="the turn pushed to the worker")
        poll_for(lambda: any(e["kind"] == lanes_msg.TURN_STARTED for _, e in _flat(frames)), 10)
        yield Rig(lanes, frames, worker)
    finally:
        worker.stop()
        origin.stop()
        lanes.stop()
        lanes_bus.stop()


def _flat(frames: list[tuple[str, list[dict[str, Any]]]]) -> list[tuple[str, dict[str, Any]]]:
    return [(t, e) for t, evs in frames for e in evs]


def _batch(*events: tuple[int, turns.TurnEventKind]) -> turns.TurnEvents:
    return turns.TurnEvents(
        events=[
            turns.TurnEvent(session_id="s-1", turn_id="t-1", seq=seq, kind=kind, data={"n": seq})
            for seq, kind in events
        ]
    )


def _sync(bus: Bus) -> None:
    """Everything ``bus`` cast to lanes before this has been taken (same socket, in order)."""
    bus.transport.call("lanes", runtime.PING, runtime.Ping())


def test_a_worker_batch_reaches_the_origin_as_one_frame_in_seq_order(rig: Rig) -> None:
    before = len(rig.frames)
    batch = _batch((1, K.TOKENS), (2, K.CHECKPOINT_SAVED), (3, K.TOOL_START))
    rig.worker.transport.cast("lanes", turns.TURN_EVENTS, batch, session="s-1")
    poll_for(lambda: len(rig.events()) >= 5, 10, what="the batch at the origin")
    new = rig.frames[before:]
    assert [t for t, _ in new] == [lanes_msg.ORIGIN_EVENTS], new  # one frame for the three
    got = new[0][1]
    want = [("tokens", 1), ("checkpoint_saved", 2), ("tool_start", 3)]
    assert [(e["kind"], e["data"]["n"]) for e in got] == want
    started = next(e for e in rig.events() if e["kind"] == lanes_msg.TURN_STARTED)
    assert [e["seq"] for e in got] == [started["seq"] + 1, started["seq"] + 2, started["seq"] + 3]


def test_batched_events_are_reordered_and_deduplicated_as_single_ones_were(rig: Rig) -> None:
    """A batch that overlaps one already relayed (a re-send) and one that fills a gap: each event once, in
    the worker's seq order, whatever the frames."""
    w = rig.worker.transport
    w.cast("lanes", turns.TURN_EVENTS, _batch((1, K.ROUND_START), (2, K.TOKENS)), session="s-1")
    w.cast("lanes", turns.TURN_EVENTS, _batch((4, K.TOOL_END), (5, K.ROUND_START)), session="s-1")  # gap
    w.cast("lanes", turns.TURN_EVENTS, _batch((2, K.TOKENS), (3, K.TOOL_START)), session="s-1")  # 2 again
    _sync(rig.worker)
    poll_for(lambda: len([e for e in rig.events() if "n" in e["data"]]) >= 5, 10, what="five events")
    mine = [e for e in rig.events() if "n" in e["data"]]
    assert [e["data"]["n"] for e in mine] == [1, 2, 3, 4, 5]
    seqs = [e["seq"] for e in rig.events()]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
    replay = rig.lanes.query(lambda core: core.stream.since("s-1", 0)[0])
    assert [e.data.get("n") for e in replay if "n" in e.data] == [1, 2, 3, 4, 5]  # the re-attach buffer too


def test_a_fenced_incarnations_batch_is_not_relayed(rig: Rig) -> None:
    stale = Bus("loop-1", 0, rig.worker.endpoints.home).start()
    try:
        stale.transport.cast("lanes", turns.TURN_EVENTS, _batch((1, K.ROUND_START), (2, K.TOKENS)))
        _sync(stale)
        rig.worker.transport.cast("lanes", turns.TURN_EVENTS, _batch((3, K.TOOL_START), (4, K.TOOL_END)))
        poll_for(lambda: any(e["data"].get("n") == 4 for e in rig.events()), 10)
    finally:
        stale.stop()
    assert [e["data"]["n"] for e in rig.events() if "n" in e["data"]] == [3, 4]


def test_control_takes_a_batch_on_its_bus_thread_in_order(tmp_path: Path) -> None:
    home = GeodeHome(tmp_path / "h").ensure()
    lanes_bus = Bus("lanes", 1, home).start()
    lanes_bus.serve("lanes", Dispatch("quiet lanes", {}))
    control_bus = Bus("control", 1, home).start()
    child = start_control(home, bus=control_bus)
    seen: list[tuple[int, str]] = []
    child.core.on_origin_events = lambda evs: seen.extend(  # type: ignore[method-assign]
        (ev.seq, threading.current_thread().name) for ev in evs
    )
    try:
        poll_for(lambda: "control" in lanes_bus.peers("lanes"), 10, what="control's hello to lanes")
        for first in range(1, 41, 8):
            evs = [
                lanes_msg.StreamEvent(session_id="s-1", turn_id="t-1", seq=s, kind="tokens", data={})
                for s in range(first, first + 8)
            ]
            body = lanes_msg.StreamEvents(events=evs)
            lanes_bus.transport.cast("control", lanes_msg.ORIGIN_EVENTS, body, session="s-1")
        poll_for(lambda: len(seen) == 40, 10, what="40 events at control")
    finally:
        child.stop()
        control_bus.stop()
        lanes_bus.stop()
    assert [s for s, _ in seen] == list(range(1, 41))
    assert {t for _, t in seen} == {"bus-control"}


def test_each_event_handles_the_rest_when_one_fails() -> None:
    got: list[int] = []

    def handler(ev: lanes_msg.StreamEvent, r: Any) -> None:
        if ev.seq == 2:
            raise RuntimeError("boom")
        got.append(ev.seq)

    evs = [lanes_msg.StreamEvent(session_id="s", turn_id="t", seq=s, kind="tokens") for s in (1, 2, 3)]
    each_event(handler)(lanes_msg.StreamEvents(events=evs), None)  # type: ignore[arg-type]
    assert got == [1, 3]
