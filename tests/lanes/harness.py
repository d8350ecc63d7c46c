"""In-process harness for the lanes actor: a recording transport and a synchronous driver over the actor.

Every driver call posts its message to the real :class:`actors.lanes.LanesActor`, waits for its answer and
then for the actor to settle (no store round trip in flight), so a test sees each step's effects in order.
"""

from __future__ import annotations

import threading
from typing import Any

from pydantic import BaseModel

from actors.lanes import TICK, LanesHandle, start_lanes_actor
from geode.lanes.records import MemoryTurnStore, TurnStore
from geode.protocol import catalog, runtime, turns
from geode.protocol import lanes as lanes_msg
from geode.protocol.envelope import Envelope
from geode.protocol.transport import Request


class RecordingTransport:
    """Casts are recorded per target (after a msgpack-free dump); calls are not used by lanes."""

    def __init__(self) -> None:
        self.casts: list[tuple[str, str, dict[str, Any]]] = []
        self.cond = threading.Condition()

    def call(self, target, type_, body=None, *, session=None, timeout_s=5.0):  # type: ignore[no-untyped-def]
        raise AssertionError("lanes makes no calls")

    def cast(self, target, type_, body=None, *, session=None):  # type: ignore[no-untyped-def]
        with self.cond:
            self.casts.append((target, type_, catalog.dump(body)))
            self.cond.notify_all()

    def to(self, target: str, type_: str | None = None) -> list[dict[str, Any]]:
        """The bodies cast to ``target``; an ``origin.events`` frame counts as its events, one by one, when
        ``origin.event`` (or any type) is asked for (``to(t, ORIGIN_EVENTS)``: the frames themselves)."""
        out: list[dict[str, Any]] = []
        with self.cond:
            for t, ty, b in self.casts:
                if t != target:
                    continue
                if ty == lanes_msg.ORIGIN_EVENTS and type_ in (None, lanes_msg.ORIGIN_EVENT):
                    out.extend(b["events"])
                elif type_ is None or ty == type_:
                    out.append(b)
        return out

    def casts_of(self, target: str, type_: str) -> list[dict[str, Any]]:
        """The frames of exactly ``type_`` cast to ``target`` (an ``origin.events`` frame is not unpacked)."""
        with self.cond:
            return [b for t, ty, b in self.casts if t == target and ty == type_]

    def runs(self) -> list[dict[str, Any]]:
        with self.cond:
            return [b | {"_worker": t} for t, ty, b in self.casts if ty == turns.TURN_RUN]

    def wait_for(self, pred, timeout: float = 5.0) -> bool:  # type: ignore[no-untyped-def]
        with self.cond:
            return self.cond.wait_for(pred, timeout)


def req(type_: str, body: BaseModel | dict[str, Any], sender: str = "") -> Request:
    env = Envelope(type=type_, body=catalog.dump(body), **{"from": sender})
    return Request(env, catalog.parse_body(type_, env.body))


class Driver:
    """The lanes actor driven one message at a time (each call returns once its effects are done)."""

    def __init__(self, lanes: LanesHandle) -> None:
        self.lanes = lanes
        self.records = lanes.records
        self.desk = lanes.desk

    def handle(self, request: Request) -> Any:
        out = self.lanes.handle(request)
        self.lanes.settle()
        return out

    def call(self, type_: str, body: BaseModel, sender: str = "") -> Any:
        return self.handle(req(type_, body, sender))

    def submit(self, s: lanes_msg.Submit) -> lanes_msg.Submitted:
        return self.call(lanes_msg.SUBMIT, s)  # type: ignore[no-any-return]

    def cancel(self, c: lanes_msg.Cancel) -> lanes_msg.Cancelled:
        return self.call(lanes_msg.CANCEL, c)  # type: ignore[no-any-return]

    def ask_approval(self, ask: lanes_msg.ApprovalAsk) -> lanes_msg.ApprovalDecision:
        return self.call(lanes_msg.APPROVAL, ask)  # type: ignore[no-any-return]

    def replay(self, r: lanes_msg.Replay) -> lanes_msg.Replayed:
        return self.call(lanes_msg.REPLAY, r)  # type: ignore[no-any-return]

    def worker_ready(self, name: str, incarnation: int, capacity: int = 1) -> None:
        self.call(
            turns.WORKER_READY, turns.WorkerReady(worker=name, incarnation=incarnation, capacity=capacity)
        )

    def child_died(self, name: str, incarnation: int) -> None:
        self.call(runtime.CHILD_DIED, runtime.ChildDied(name=name, incarnation=incarnation))

    def turn_done(self, d: turns.TurnDone) -> None:
        self.call(turns.TURN_DONE, d)

    def status(self) -> dict[str, Any]:
        return self.call(lanes_msg.LANES_STATUS, lanes_msg.LanesStatus())  # type: ignore[no-any-return]

    def tick(self) -> None:
        self.lanes.tell(TICK)
        self.lanes.settle()

    def queued(self) -> list[str]:
        return self.lanes.query(lambda core: core.queue.queued())

    def running(self) -> list[str]:
        return self.lanes.query(lambda core: core.queue.running())

    def stop(self) -> None:
        self.lanes.stop()


def make(store: TurnStore | None = None, **kw: Any) -> tuple[Driver, RecordingTransport, MemoryTurnStore]:
    store = store or MemoryTurnStore()
    tr = RecordingTransport()
    return Driver(start_lanes_actor(store, tr, **kw)), tr, store  # type: ignore[return-value]


def submit(svc: Driver, turn: str, session: str, origin: str = "control", **kw: Any) -> lanes_msg.Submitted:
    return svc.submit(
        lanes_msg.Submit(turn_id=turn, session_id=session, origin=origin, input={"text": turn}, **kw)
    )


def done(svc: Driver, turn: str, session: str, worker: str = "", reason: str = "natural") -> None:
    result = turns.TurnResult(text=f"done {turn}", termination_reason=turns.TerminationReason(reason))
    svc.turn_done(turns.TurnDone(turn_id=turn, session_id=session, worker=worker, result=result))
