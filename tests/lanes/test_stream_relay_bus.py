"""A turn's stream over real buses: lanes relays a worker's events on its bus thread, control takes them
on its own (issue 34: no thread hand-off per event on either hop).

Every bus is a real one over ipc in the test's own home. Lanes: a worker's ``turn.event`` reaches the
turn's origin even while the lanes actor is busy with something else (before, each event queued behind the
actor's other work). Control: ``origin.event`` pushes run on control's bus thread, in order, never on a
handler thread.
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
from actors.lanes import LanesHandle, start_lanes, start_lanes_actor
from geode.home import GeodeHome
from geode.lanes.queue import LaneQueue
from geode.lanes.records import MemoryTurnStore
from geode.lanes.settings import LanesSection
from geode.lanes.stream import each_event
from geode.protocol import lanes as lanes_msg
from geode.protocol import runtime, turns
from geode.protocol.dispatch import Dispatch
from geode.protocol.transport import Request
from geode.records.engine import RecordEngine
from geode.records.service import StoreService
from tests.waiting import poll_for


@dataclass
class Wired:
    lanes: LanesHandle
    origin_events: list[dict[str, Any]]
    runs: list[turns.TurnRun]
    worker: Bus


@pytest.fixture
def wired(tmp_path: Path) -> Iterator[Wired]:
    """lanes (the real actor) served on a bus; an origin peer and a worker peer on their own buses."""
    home = GeodeHome(tmp_path / "h").ensure()
    lanes_bus = Bus("lanes", 1, home).start()
    lanes = start_lanes_actor(MemoryTurnStore(), lanes_bus.transport, queue=LaneQueue(global_cap=2))
    lanes_bus.serve("lanes", lanes)
    origin_events: list[dict[str, Any]] = []
    runs: list[turns.TurnRun] = []

    def on_event(b: lanes_msg.StreamEvent, r: Request) -> None:
        origin_events.append(b.model_dump())

    def on_run(b: turns.TurnRun, r: Request) -> turns.TurnRunAccepted:
        runs.append(b)
        return turns.TurnRunAccepted(worker="loop-1")

    origin = Bus("origin", 1, home).start()
    routes: dict[str, Any] = {lanes_msg.ORIGIN_EVENT: on_event, lanes_msg.ORIGIN_EVENTS: each_event(on_event)}
    origin.connect_peer("lanes", Dispatch("test origin", routes))  # as every origin: one or several a frame
    worker = Bus("loop-1", 1, home).start()
    worker.connect_peer("lanes", Dispatch("test worker", {turns.TURN_RUN: on_run}))
    try:
        poll_for(lambda: {"origin", "loop-1"} <= set(lanes_bus.peers("lanes")), 10, what="both peers' hellos")
        worker.transport.call("lanes", turns.WORKER_READY, turns.WorkerReady(worker="loop-1", incarnation=1))
        sub = lanes_msg.Submit(turn_id="t-1", session_id="s-1", origin="origin", input={"text": "hi"})
        origin.transport.call("lanes", lanes_msg.SUBMIT, sub)
        poll_for(lambda: runs, 10, what="the turn pushed to the worker")
        yield Wired(lanes, origin_events, runs, worker)
    finally:
        worker.stop()
        origin.stop()
        lanes.stop()
        lanes_bus.stop()


def _event(seq: int, kind: turns.TurnEventKind, **data: Any) -> turns.TurnEvent:
    return turns.TurnEvent(session_id="s-1", turn_id="t-1", seq=seq, kind=kind, data=data)


def test_worker_events_reach_the_origin_while_the_lanes_actor_is_busy(wired: Wired) -> None:
    poll_for(lambda: any(e["kind"] == lanes_msg.TURN_STARTED for e in wired.origin_events), 10)
    entered, release = threading.Event(), threading.Event()

    def hold(core: Any) -> None:
        entered.set()
        release.wait(20)

    holder = threading.Thread(target=wired.lanes.query, args=(hold, 30.0), daemon=True)
    holder.start()
    try:
        assert entered.wait(10), "the lanes actor never ran the blocking query"
        for seq, kind in enumerate((turns.TurnEventKind.ROUND_START, turns.TurnEventKind.TOOL_START), 1):
            wired.worker.transport.cast("lanes", turns.TURN_EVENT, _event(seq, kind, round=1), session="s-1")
        poll_for(  # both (a frame each: the second may come a moment after the first)
            lambda: len([e for e in wired.origin_events if e["kind"] in ("round_start", "tool_start")]) == 2,
            10,
            what="the worker's events at the origin while the actor is busy",
        )
    finally:
        release.set()
        holder.join(10)
    kinds = [e["kind"] for e in wired.origin_events]
    seqs = [e["seq"] for e in wired.origin_events]
    assert kinds[:3] == [lanes_msg.TURN_QUEUED, lanes_msg.TURN_STARTED, "round_start"], kinds
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)  # lanes' seq: one order for both threads


def test_a_fenced_incarnations_events_are_not_relayed(wired: Wired) -> None:
    """An older incarnation of the turn's worker is fenced on the bus thread as it was in the actor."""
    poll_for(lambda: any(e["kind"] == lanes_msg.TURN_STARTED for e in wired.origin_events), 10)
    stale = Bus("loop-1", 0, wired.worker.endpoints.home).start()
    try:
        stale.transport.cast("lanes", turns.TURN_EVENT, _event(1, turns.TurnEventKind.TEXT_DELTA, text="old"))
        stale.transport.call("lanes", runtime.PING, runtime.Ping())  # after the cast on the same socket
        wired.worker.transport.cast(
            "lanes", turns.TURN_EVENT, _event(2, turns.TurnEventKind.TEXT_DELTA, text="new")
        )
        poll_for(lambda: any(e["data"].get("text") == "new" for e in wired.origin_events), 10)
    finally:
        stale.stop()
    assert [e["data"]["text"] for e in wired.origin_events if e["kind"] == "text_delta"] == ["new"]


def test_control_takes_origin_events_on_its_bus_thread_in_order(tmp_path: Path) -> None:
    home = GeodeHome(tmp_path / "h").ensure()
    lanes_bus = Bus("lanes", 1, home).start()
    lanes_bus.serve("lanes", Dispatch("quiet lanes", {}))
    control_bus = Bus("control", 1, home).start()
    child = start_control(home, bus=control_bus)
    seen: list[tuple[int, str]] = []
    child.core.on_origin_event = lambda ev: seen.append((ev.seq, threading.current_thread().name))  # type: ignore[method-assign]
    try:
        poll_for(lambda: "control" in lanes_bus.peers("lanes"), 10, what="control's hello to lanes")
        for seq in range(1, 41):
            ev = lanes_msg.StreamEvent(session_id="s-1", turn_id="t-1", seq=seq, kind="text_delta", data={})
            lanes_bus.transport.cast("control", lanes_msg.ORIGIN_EVENT, ev, session="s-1")
        poll_for(lambda: len(seen) == 40, 10, what="40 events at control")
    finally:
        child.stop()
        control_bus.stop()
        lanes_bus.stop()
    assert [s for s, _ in seen] == list(range(1, 41))
    assert {t for _, t in seen} == {"bus-control"}  # no hand-off to a handler thread per event


def test_a_pending_approval_holds_no_lanes_handler(tmp_path: Path) -> None:
    """``[lanes] handlers = 1``: a person's pending approval held lanes' only handler thread, so every other
    lanes request waited behind it; now lanes takes its requests on the bus thread and answers each when the
    actor does (a deferred reply), so a status asked meanwhile is answered at once."""
    home = GeodeHome(tmp_path / "h").ensure()
    engine = RecordEngine.for_home(home).open()
    buses = [Bus(name, 1, home).start() for name in ("store", "lanes", "origin", "loop-1", "executor")]
    store_bus, lanes_bus, origin, worker, executor = buses
    store_bus.serve("store", StoreService(engine))
    child = start_lanes(home, bus=lanes_bus, settings=LanesSection(handlers=1, global_cap=2))
    events: list[dict[str, Any]] = []
    answers: list[dict[str, Any]] = []

    def on_event(b: lanes_msg.StreamEvent, r: Request) -> None:
        events.append(b.model_dump())

    routes: dict[str, Any] = {lanes_msg.ORIGIN_EVENT: on_event, lanes_msg.ORIGIN_EVENTS: each_event(on_event)}
    origin.connect_peer("lanes", Dispatch("test origin", routes))
    worker.connect_peer(
        "lanes",
        Dispatch("test worker", {turns.TURN_RUN: lambda b, r: turns.TurnRunAccepted(worker="loop-1")}),
    )
    done = threading.Event()

    def beating() -> None:
        beat = turns.WorkerHeartbeat(worker="loop-1", incarnation=1, running=["t-1"])
        while not done.wait(0.3):
            worker.transport.call("lanes", turns.WORKER_HEARTBEAT, beat, timeout_s=5)

    try:
        poll_for(lambda: {"origin", "loop-1"} <= set(lanes_bus.peers("lanes")), 10, what="the peers' hellos")
        worker.transport.call("lanes", turns.WORKER_READY, turns.WorkerReady(worker="loop-1", incarnation=1))
        sub = lanes_msg.Submit(turn_id="t-1", session_id="s-1", origin="origin", input={"text": "hi"})
        origin.transport.call("lanes", lanes_msg.SUBMIT, sub)
        poll_for(
            lambda: any(e["kind"] == lanes_msg.TURN_STARTED for e in events), 10, what="the turn started"
        )
        threading.Thread(target=beating, daemon=True).start()  # the worker stays alive, not reaped as silent
        ask = lanes_msg.ApprovalAsk(
            approval_id="a-1", session_id="s-1", turn_id="t-1", tool_name="write_file"
        )

        def asking() -> None:
            answers.append(executor.transport.call("lanes", lanes_msg.APPROVAL, ask, timeout_s=60))

        threading.Thread(target=asking, daemon=True).start()
        poll_for(lambda: any(e["kind"] == lanes_msg.APPROVAL_REQUEST for e in events), 10, what="the ask")
        status = origin.transport.call("lanes", lanes_msg.LANES_STATUS, lanes_msg.LanesStatus(), timeout_s=5)
        assert status["pending_approvals"] == 1 and not answers  # answered while the approval waits
        reply = lanes_msg.ApprovalReply(approval_id="a-1", decision="y")
        assert origin.transport.call("lanes", lanes_msg.APPROVAL_REPLY, reply)["ok"] is True
        assert poll_for(lambda: answers, 10, what="the decision")[0]["decision"] == "y"
    finally:
        done.set()
        for bus in (executor, worker, origin):
            bus.stop()
        child.stop()
        lanes_bus.stop()
        store_bus.stop()
        engine.close()
