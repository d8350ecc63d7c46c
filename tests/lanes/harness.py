"""In-process harness for LanesService: a recording transport and scripted loop workers."""

from __future__ import annotations

import threading
from typing import Any

from pydantic import BaseModel

from geode.lanes.records import MemoryTurnStore
from geode.lanes.service import LanesService
from geode.protocol import catalog, turns
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
        with self.cond:
            return [b for t, ty, b in self.casts if t == target and (type_ is None or ty == type_)]

    def runs(self) -> list[dict[str, Any]]:
        with self.cond:
            return [b | {"_worker": t} for t, ty, b in self.casts if ty == turns.TURN_RUN]

    def wait_for(self, pred, timeout: float = 5.0) -> bool:  # type: ignore[no-untyped-def]
        with self.cond:
            return self.cond.wait_for(pred, timeout)


def req(type_: str, body: BaseModel | dict[str, Any], sender: str = "") -> Request:
    env = Envelope(type=type_, body=catalog.dump(body), **{"from": sender})
    return Request(env, catalog.parse_body(type_, env.body))


def make(
    store: MemoryTurnStore | None = None, **kw: Any
) -> tuple[LanesService, RecordingTransport, MemoryTurnStore]:
    store = store or MemoryTurnStore()
    tr = RecordingTransport()
    svc = LanesService(store, tr, **kw)
    svc.start()
    return svc, tr, store


def submit(
    svc: LanesService, turn: str, session: str, origin: str = "control", **kw: Any
) -> lanes_msg.Submitted:
    return svc.submit(
        lanes_msg.Submit(turn_id=turn, session_id=session, origin=origin, input={"text": turn}, **kw)
    )


def done(svc: LanesService, turn: str, session: str, worker: str = "", reason: str = "natural") -> None:
    result = turns.TurnResult(text=f"done {turn}", termination_reason=turns.TerminationReason(reason))
    svc.turn_done(turns.TurnDone(turn_id=turn, session_id=session, worker=worker, result=result))
