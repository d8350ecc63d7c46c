"""The lanes state machine's state and primitives: active turn records, queue, pool, desk, streams, and how
a store round trip is issued (``_io``: run by the owner's ``StoreRunner``, continued on the owner's thread).

Single-threaded by contract, like all of ``geode/lanes``: only the lanes actor's thread touches it, with one
exception: the stream relay (:meth:`LanesState.relay_event`) also runs on the bus thread, so a worker's
``turn.event`` reaches the turn's origin without a hand-off to the actor. The stream's state (sequence
numbers, buffer, reorder) is touched only under ``stream_lock``, on either thread; a relay only reads the
actor's turn records and pool (one dict lookup each, never iterating a dict the actor may be changing).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

from pydantic import BaseModel

from geode.lanes.approvals import ApprovalDesk
from geode.lanes.pool import WorkerPool
from geode.lanes.queue import LaneQueue
from geode.lanes.records import Outcome, StoreRunner, TurnStore, inline_runner
from geode.lanes.settings import MAX_REQUEUES
from geode.lanes.stream import Reorder, StreamBuffer
from geode.lanes.stream_relay import Held, relay_events, send_events
from geode.metrics import record as metrics
from geode.protocol import lanes as lanes_msg
from geode.protocol import turns
from geode.protocol.transport import Request
from geode.records.models import TurnRecord, TurnState
from geode.telemetry import spans

log = logging.getLogger(__name__)
ORPHAN_GRACE_S = 3.0
LOST_RUN_GRACE_S = 3.0  # a turn.run its worker never reported in a heartbeat after this long was lost
RECENT_OUTCOMES = 8
STATUS_TURNS = 50  # the oldest active turns listed in lanes.status

Reply = BaseModel | dict[str, Any] | None
Fresh = tuple[lanes_msg.Submit, int]  # a submitted turn with no record stored yet, and its queue position
Answer = Callable[[Reply | BaseException], None]


def _drop(_: object) -> None:
    """The answer of a cast: nobody waits for it."""


@dataclass(frozen=True)
class Asked(Request):
    """A request plus the callback that answers it, now or from a continuation (exactly once)."""

    answer: Answer = _drop


def outcome_row(rec: TurnRecord) -> dict[str, Any]:
    """A done turn as a replay's ``outcomes`` carry it (lanes' recent ones, the store's, control's)."""
    return {"turn_id": rec.turn_id, "state": rec.state.value, "outcome": rec.outcome}


def copy_record(rec: TurnRecord) -> TurnRecord:
    """A copy whose fields lanes may reassign while the original is being stored (or the other way round).
    Shallow (1-2 µs, not 40-50 µs deep): lanes never changes a record's ``input``, ``settings`` or
    ``outcome`` in place, it only assigns new values to fields; the store serializes what it gets."""
    return rec.model_copy()


def requeues_of(rec: TurnRecord) -> int:
    """How many times the turn went back to the queue because its worker was lost."""
    return rec.requeues


class LanesState:
    """Queue, pool, approvals, streams and every active turn's record, plus the primitives on them."""

    def __init__(
        self,
        records: TurnStore,
        transport: Any,
        *,
        runner: StoreRunner = inline_runner,
        queue: LaneQueue | None = None,
        pool: WorkerPool | None = None,
        stream: StreamBuffer | None = None,
        orphan_grace_s: float = ORPHAN_GRACE_S,
        clock: Any = time.monotonic,
        wall: Any = time.time,
        routable: Callable[[str], bool] | None = None,
        lost_run_grace_s: float = LOST_RUN_GRACE_S,
        name: str = "lanes",
        incarnation: int = 0,
        max_pending_approvals: int = 1024,
        max_requeues: int = MAX_REQUEUES,
        cap_ceiling: int | None = None,
    ) -> None:
        self.name, self.incarnation = name, incarnation
        self.cap_ceiling = cap_ceiling  # set: the global cap follows the workers' capacity up to it
        self.executor_changes = 0  # main's executor lifecycle events seen (its catalogue may have changed)
        self.max_requeues = max_requeues
        self.records = records  # blocking calls: only ever made through ``runner``
        self.runner = runner
        # a put continued by callback (the store client sends it, the bus hands its reply over: no thread
        # waits for it) when both the records and the runner offer it; else a blocking put on the runner
        self._put_then = getattr(records, "put_turn_then", None) if hasattr(runner, "start") else None
        self.transport = transport  # casts only (they never wait for another process)
        self.queue = queue or LaneQueue()
        self.pool = pool or WorkerPool(clock=clock)
        self.stream = stream or StreamBuffer()
        self.desk = ApprovalDesk(max_pending_approvals)  # each pending approval holds one bus handler thread
        self.reorder = Reorder()
        # session → (origin, events, since): its turn's last batch, sent with the done (stream_relay)
        self.held_ends: dict[str, Held] = {}
        # the stream (seq, buffer, reorder) and the casts to origins: the actor and the bus thread's relay
        # take it in turn, so seq order is send order (reentrant: a relay under it emits under it)
        self.stream_lock = threading.RLock()
        self.orphan_grace_s = orphan_grace_s
        self.routable = routable  # is a worker reachable yet (its peer hello arrived)? None: always
        self.lost_run_grace_s = lost_run_grace_s
        self._clock, self._wall = clock, wall
        self._recs: dict[str, TurnRecord] = {}  # every queued or running turn's record, as last stored
        self._admitting: dict[str, list[tuple[str, Answer]]] = {}  # turn → (session, answer) awaiting store
        self._fresh: dict[str, Fresh] = {}  # turn → its submit, while admission decides its first record
        self._finishing: dict[str, list[Answer]] = {}  # turn → turn.done answers awaiting its done record
        self._starting: dict[str, bool] = {}  # turn → cancel once pushed (its running record is in flight)
        self._orphans: dict[str, tuple[str | None, int | None, float]] = {}
        self._recent: OrderedDict[str, list[dict[str, Any]]] = OrderedDict()
        self._ran_on: OrderedDict[str, str] = OrderedDict()  # session → its last turn's worker (preferred)
        self._start_failed = False
        self.inflight = 0  # store round trips issued and not yet continued

    @property
    def catalogue_stamp(self) -> str:
        """Changes whenever main's executor (re)started or exited: told to remote workers in heartbeats."""
        return f"{self.incarnation}.{self.executor_changes}"

    def executor_changed(self) -> None:
        self.executor_changes += 1

    def follow_capacity(self) -> None:
        """With no ``[lanes] global_cap`` set, the cap is the capacity the registered loop workers offer (at
        least 1, at most the ceiling): a host that joins raises it; one that leaves lowers it, and turns
        already running beyond the new cap run to their end (the queue only grants fewer)."""
        if self.cap_ceiling is None:
            return
        cap = max(1, min(self.cap_ceiling, self.pool.capacity()))
        if cap != self.queue.global_cap:
            log.info("global cap %d -> %d (the loop workers' capacity)", self.queue.global_cap, cap)
            self.queue.global_cap = cap

    def _io(self, key: str, call: Callable[[], Any], then: Callable[[Outcome], None]) -> None:
        """One store round trip, continued by ``then`` on this state machine's thread."""
        self.inflight += 1

        def done(out: Outcome) -> None:
            self.inflight -= 1
            then(out)

        self.runner(key, call, done)

    def _put(self, rec: TurnRecord, then: Callable[[Outcome], None]) -> None:
        snapshot = copy_record(rec)  # the store call runs elsewhere; our copy may change meanwhile
        put_then = self._put_then
        if put_then is None:
            self._io(rec.turn_id, lambda: self.records.put_turn(snapshot), then)
            return
        self.inflight += 1

        def done(out: Outcome) -> None:
            self.inflight -= 1
            then(out)

        self.runner.start(rec.turn_id, partial(put_then, snapshot), done)  # type: ignore[attr-defined]

    def _age(self, rec: TurnRecord) -> float:
        """Seconds since the turn's first submission (its durable ``created_at``)."""
        return max(0.0, self._wall() - rec.created_at) if rec.created_at else 0.0

    def _first_at(self, rec: TurnRecord) -> float:
        """The turn's first submission on the queue's (monotonic) clock."""
        return float(self._clock()) - self._age(rec)

    def relay_event(self, ev: turns.TurnEvent, sender: str) -> None:
        """A worker's ``turn.event``: into the session's stream and on to the turn's origin. Thread-safe: the
        bus thread calls it as the frame arrives (no hand-off), the actor when a test drives it."""
        relay_events(self, [ev], sender)  # fenced, reordered and sent (or held) as one of a batch

    def _relay(self, ev: turns.TurnEvent) -> None:
        self._emit(ev.session_id, ev.turn_id, ev.kind.value, ev.data)

    def _emit(self, session_id: str, turn_id: str, kind: str, data: dict[str, Any]) -> lanes_msg.StreamEvent:
        rec = self._recs.get(turn_id)
        origin = rec.origin if rec is not None else ""
        with self.stream_lock:  # seq assigned and cast queued in one step: the origin gets them in seq order
            out = self.stream.append(session_id, turn_id, kind, data)
            if origin:  # after the session's held end, if any (a done: in one frame with it)
                with spans.use(rec.trace if rec is not None and kind == lanes_msg.TURN_DONE else None):
                    send_events(self, origin, session_id, [out])
        return out

    def _emit_all(self, session_id: str, turn_id: str, items: list[tuple[str, dict[str, Any]]]) -> None:
        """Lanes' own events of one turn emitted back to back (a turn started at once: queued, started): one
        ``origin.events`` frame to the origin, each event numbered in the stream as if it came alone."""
        rec = self._recs.get(turn_id)
        if len(items) == 1 or rec is None or not rec.origin:
            for kind, data in items:
                self._emit(session_id, turn_id, kind, data)
            return
        with self.stream_lock:  # seq assigned and cast queued in one step, as in _emit
            outs = [self.stream.append(session_id, turn_id, kind, data) for kind, data in items]
            send_events(self, rec.origin, session_id, outs)

    def _forget_stream(self, turn_id: str) -> None:
        """A turn ended or went back to the queue: release its held-back events now, then forget them."""
        with self.stream_lock:
            for item in self.reorder.forget(turn_id):
                self._relay(item)

    def _finish(self, rec: TurnRecord) -> None:
        self._forget_stream(rec.turn_id)
        self.queue.release(rec.turn_id)
        self.pool.finish(rec.turn_id)
        self._orphans.pop(rec.turn_id, None)
        self.desk.deny_where(turn_id=rec.turn_id, reason="turn_ended")
        reason = str((rec.outcome or {}).get("termination_reason") or "unknown")
        metrics.turn_ended(rec.origin, rec.mode, reason, self._age(rec))  # counted before the origin hears
        metrics.lane_queue(len(self.queue.queued()))
        self._emit(rec.session_id, rec.turn_id, lanes_msg.TURN_DONE, {"result": rec.outcome or {}})
        recent = self._recent.setdefault(rec.session_id, [])
        recent.append(outcome_row(rec))
        del recent[:-RECENT_OUTCOMES]
        self._recent.move_to_end(rec.session_id)
        while len(self._recent) > 256:
            self._recent.popitem(last=False)
        self._recs.pop(rec.turn_id, None)

    def _send_run(self, worker: str, rec: TurnRecord, resume: bool) -> None:
        run = turns.TurnRun(
            turn_id=rec.turn_id,
            session_id=rec.session_id,
            mode=rec.mode,
            origin=rec.origin,
            input=turns.TurnInput.model_validate(rec.input),
            resume=resume,
            attempt=rec.attempts,
            settings=dict(rec.settings),
        )
        self.transport.cast(worker, turns.TURN_RUN, run, session=rec.session_id)

    def _send_cancel(self, worker: str, rec: TurnRecord | None, reason: str) -> None:
        if rec is None:
            return
        cancel = turns.TurnCancel(turn_id=rec.turn_id, session_id=rec.session_id, reason=reason)
        self.transport.cast(worker, turns.TURN_CANCEL, cancel)

    @staticmethod
    def _log_failed(what: str, out: Outcome) -> None:
        if isinstance(out, BaseException):
            log.warning("cannot record %s: %s", what, out)

    def turn_ages(self) -> list[dict[str, Any]]:
        """The oldest active turns: state, worker, age since first submission, re-queues, attempts."""
        recs = sorted(self._recs.values(), key=lambda t: (t.created_at, t.turn_id))[:STATUS_TURNS]
        return [
            {
                "turn_id": t.turn_id,
                "session_id": t.session_id,
                "state": self.queue.state_of(t.turn_id) or t.state.value,
                "worker": t.worker,
                "age_s": round(self._age(t), 3),
                "requeues": requeues_of(t),
                "attempts": t.attempts,
            }
            for t in recs
            if t.state != TurnState.DONE
        ]

    def status(self) -> dict[str, Any]:
        return {
            "lanes": {**self.queue.stats(), "global_cap_follows": self.cap_ceiling is not None},
            "turns": self.turn_ages(),
            "workers": self.pool.snapshot(),
            "pending_approvals": len(self.desk.pending()),
            "orphans": sorted(self._orphans),
            "streams": self.stream.sessions(),
            "store_inflight": self.inflight,
        }
