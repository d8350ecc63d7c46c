"""LanesService: admits turns into the one LaneQueue, runs them on the worker pool, relays their streams.

Durable turn records (queued → running on worker W incarnation N → done) make every restart safe: on start
queued records are queued again and running ones hold their lanes until their worker confirms them by
heartbeat, or are re-queued with ``resume`` after a grace period. A dead worker's turns are re-queued by the
supervision path (``runtime.child_died``, a new READY incarnation, or missed heartbeats), never by the
happy path.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from geode.lanes.approvals import ApprovalDesk
from geode.lanes.pool import DeadWorker, WorkerPool
from geode.lanes.queue import LaneQueue
from geode.lanes.records import TurnStore
from geode.lanes.stream import Reorder, StreamBuffer
from geode.protocol import lanes as lanes_msg
from geode.protocol import runtime, turns
from geode.protocol.errors import BadRequest, GeodeError
from geode.protocol.transport import Request, Transport
from geode.records.models import TurnRecord, TurnState

log = logging.getLogger(__name__)
ORPHAN_GRACE_S = 3.0
LOST_RUN_GRACE_S = 3.0  # a turn.run its worker never reported in a heartbeat after this long was lost
RECENT_OUTCOMES = 8


@dataclass
class _Meta:
    session_id: str
    origin: str
    mode: str


def cancelled_result(reason: str = "user") -> dict[str, Any]:
    return turns.TurnResult(
        termination_reason=turns.TerminationReason.USER_CANCELLED,
        error=f"cancelled before it started ({reason}); completed side effects remain in place",
    ).model_dump(mode="json")


class LanesService:
    """A geode Service for the ``lanes`` endpoint (thread-safe; handlers may run concurrently)."""

    def __init__(
        self,
        records: TurnStore,
        transport: Transport,
        *,
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
    ) -> None:
        self.name, self.incarnation = name, incarnation
        self.records = records
        self.transport = transport
        self.queue = queue or LaneQueue()
        self.pool = pool or WorkerPool(clock=clock)
        self.stream = stream or StreamBuffer()
        self.desk = ApprovalDesk(max_pending_approvals)  # each pending approval holds one handler thread
        self.reorder = Reorder()
        self.orphan_grace_s = orphan_grace_s
        self.routable = routable  # is a worker reachable yet (its peer hello arrived)? None: always
        self.lost_run_grace_s = lost_run_grace_s
        self._clock, self._wall = clock, wall
        self._mu = threading.RLock()
        self._meta: dict[str, _Meta] = {}
        self._orphans: dict[str, tuple[str | None, int | None, float]] = {}
        self._recent: OrderedDict[str, list[dict[str, Any]]] = OrderedDict()
        self.runs_sent: list[tuple[str, str, bool]] = []  # (turn, worker, resume): bounded observation
        self.started = False

    # --- start-up -------------------------------------------------------------------------------------
    def start(self) -> dict[str, int]:
        """Reload durable turn records: queued ones queue again; running ones wait for their worker."""
        with self._mu:
            running = self.records.list_turns(state=TurnState.RUNNING.value)
            queued = self.records.list_turns(state=TurnState.QUEUED.value)
            deadline = self._clock() + self.orphan_grace_s
            for rec in running:
                self._meta[rec.turn_id] = _Meta(rec.session_id, rec.origin, rec.mode)
                self.queue.adopt_running(rec.turn_id, rec.session_id)
                self._orphans[rec.turn_id] = (rec.worker, rec.incarnation, deadline)
            for rec in queued:
                self._meta[rec.turn_id] = _Meta(rec.session_id, rec.origin, rec.mode)
                self.queue.enqueue(rec.turn_id, rec.session_id, front=bool(rec.input.get("_resume")))
            self.started = True
        self.schedule()
        return {"running": len(running), "queued": len(queued)}

    # --- dispatch -------------------------------------------------------------------------------------
    def handle(self, request: Request) -> BaseModel | dict[str, Any] | None:
        b = request.body
        match request.type:
            case lanes_msg.SUBMIT:
                return self.submit(b)  # type: ignore[arg-type]
            case lanes_msg.CANCEL:
                return self.cancel(b)  # type: ignore[arg-type]
            case lanes_msg.APPROVAL:
                return self.ask_approval(b)  # type: ignore[arg-type]
            case (
                lanes_msg.APPROVAL_REPLY
            ):  # only the turn's origin peer may answer (the sender's name, sans "#inc")
                peer = request.sender.split("#", 1)[0]
                return lanes_msg.Ok(ok=self.desk.answer(b.approval_id, b.decision, origin=peer, note=b.note))  # type: ignore[attr-defined]
            case lanes_msg.REPLAY:
                return self.replay(b)  # type: ignore[arg-type]
            case lanes_msg.LANES_STATUS:
                return self.status()
            case runtime.STATUS:
                return runtime.StatusReply(
                    name=self.name, incarnation=self.incarnation, pid=os.getpid(), detail=self.status()
                )
            case lanes_msg.TURN:
                rec = self.records.get_turn(b.turn_id)  # type: ignore[attr-defined]
                return rec.model_dump(mode="json") if rec else {}
            case turns.WORKER_READY:
                self.worker_ready(b.worker, b.incarnation, b.capacity)  # type: ignore[attr-defined]
                return turns.Ack()
            case turns.WORKER_HEARTBEAT:
                return turns.Ack(ok=self.heartbeat(b))  # type: ignore[arg-type]
            case turns.TURN_EVENT:
                self.turn_event(b, request.sender)  # type: ignore[arg-type]
                return None
            case turns.TURN_DONE:
                self.turn_done(b)  # type: ignore[arg-type]
                return turns.Ack()
            case runtime.CHILD_DIED:
                self.child_died(b.name, b.incarnation)  # type: ignore[attr-defined]
                return runtime.Ack()
            case runtime.PING:
                return runtime.Pong(name=self.name, incarnation=self.incarnation, pid=os.getpid())
        raise BadRequest(f"lanes does not handle {request.type}")

    # --- admission ------------------------------------------------------------------------------------
    def submit(self, s: lanes_msg.Submit) -> lanes_msg.Submitted:
        with self._mu:
            existing = self.records.get_turn(s.turn_id)
            if existing is not None:  # an idempotent retry
                if existing.session_id != s.session_id:
                    raise BadRequest(f"turn {s.turn_id} belongs to another session")
                return lanes_msg.Submitted(
                    turn_id=s.turn_id, session_id=s.session_id, state=existing.state.value
                )
            position = self.queue.enqueue(s.turn_id, s.session_id, front=s.resume)
            now = self._wall()
            inp = {**s.input, "_settings": s.settings, "_resume": s.resume}
            rec = TurnRecord(
                turn_id=s.turn_id,
                session_id=s.session_id,
                mode=s.mode,
                origin=s.origin,
                input=inp,
                created_at=now,
                updated_at=now,
            )
            try:
                self.records.put_turn(rec)
            except GeodeError:
                self.queue.remove(s.turn_id, missing_ok=True)
                raise
            self._meta[s.turn_id] = _Meta(s.session_id, s.origin, s.mode)
            self._emit(s.session_id, s.turn_id, lanes_msg.TURN_QUEUED, {"position": position})
        self.schedule()
        return lanes_msg.Submitted(
            turn_id=s.turn_id, session_id=s.session_id, state="queued", position=position
        )

    def schedule(self) -> int:
        """Start every turn the lanes and the free workers allow. Returns how many started."""
        started = 0
        with self._mu:
            while True:
                free = self.pool.free_slots(self.routable)
                if free <= 0:
                    break
                grants = self.queue.grant(limit=1)
                if not grants:
                    break
                g = grants[0]
                worker = self.pool.pick(self.routable)
                rec = self.records.get_turn(g.turn_id)
                if worker is None or rec is None:
                    if rec is not None:
                        self.queue.requeue(g.turn_id)  # no worker after all: back to the head of its lane
                    else:
                        self.queue.release(g.turn_id)  # the record vanished (store pruned it): drop it
                    break
                rec.state, rec.worker, rec.incarnation = TurnState.RUNNING, worker.name, worker.incarnation
                rec.attempts += 1
                rec.updated_at = self._wall()
                try:
                    self.records.put_turn(rec)
                except GeodeError as exc:
                    log.warning("cannot record turn %s as running: %s", g.turn_id, exc)
                    self.queue.requeue(g.turn_id)
                    break
                self.pool.assign(worker.name, g.turn_id)
                resume = bool(rec.input.get("_resume")) or rec.attempts > 1
                self._emit(
                    rec.session_id,
                    rec.turn_id,
                    lanes_msg.TURN_STARTED,
                    {"worker": worker.name, "waited_s": round(g.waited_s, 4), "resume": resume},
                )
                self._send_run(worker.name, rec, resume)
                started += 1
        return started

    def _send_run(self, worker: str, rec: TurnRecord, resume: bool) -> None:
        inp = {k: v for k, v in rec.input.items() if not k.startswith("_")}
        run = turns.TurnRun(
            turn_id=rec.turn_id,
            session_id=rec.session_id,
            mode=rec.mode,
            origin=rec.origin,
            input=turns.TurnInput.model_validate(inp),
            resume=resume,
            attempt=rec.attempts,
            settings=dict(rec.input.get("_settings") or {}),
        )
        self.runs_sent.append((rec.turn_id, worker, resume))
        del self.runs_sent[:-256]
        self.transport.cast(worker, turns.TURN_RUN, run, session=rec.session_id)

    # --- worker pool ---------------------------------------------------------------------------------
    def worker_ready(self, name: str, incarnation: int, capacity: int = 1) -> None:
        with self._mu:
            dead = self.pool.ready(name, incarnation, capacity)
            if dead is not None:
                self._requeue_dead(dead)
            for turn_id, (w, inc, _) in list(self._orphans.items()):
                if w == name and inc != incarnation:  # its worker restarted: the turn will not come back
                    self._requeue_orphan(turn_id)
        self.schedule()

    def heartbeat(self, hb: turns.WorkerHeartbeat) -> bool:
        with self._mu:
            if not self.pool.heartbeat(hb.worker, hb.incarnation):  # unknown (lanes restarted): register
                dead = self.pool.ready(hb.worker, hb.incarnation, max(1, len(hb.running) + hb.free))
                if dead is not None:
                    self._requeue_dead(dead)
            for turn_id in hb.running:
                orphan = self._orphans.get(turn_id)
                if orphan and orphan[0] == hb.worker and orphan[1] == hb.incarnation:
                    del self._orphans[turn_id]
                    self.pool.assign(hb.worker, turn_id)  # still running there: adopt it
            for turn_id in self.pool.unconfirmed(hb.worker, hb.running, self.lost_run_grace_s):
                log.warning("turn %s never reached %s; re-queueing it", turn_id, hb.worker)
                self._requeue(turn_id)
        self.schedule()
        return True

    def child_died(self, name: str, incarnation: int) -> None:
        """Supervision path: release a dead worker's lanes and re-queue its turns; deny its origin's asks."""
        with self._mu:
            dead = self.pool.died(name, incarnation)
            if dead is not None:
                self._requeue_dead(dead)
            for turn_id, (w, inc, _) in list(self._orphans.items()):
                if w == name and inc == incarnation:
                    self._requeue_orphan(turn_id)
        self.desk.deny_where(origin=name, reason="disconnect")
        self.schedule()

    def _requeue_dead(self, dead: DeadWorker) -> None:
        log.warning("worker %s#%s is gone; re-queueing %s", dead.name, dead.incarnation, list(dead.turns))
        for turn_id in dead.turns:
            self._requeue(turn_id)

    def _requeue_orphan(self, turn_id: str) -> None:
        self._orphans.pop(turn_id, None)
        self._requeue(turn_id)

    def _requeue(self, turn_id: str) -> None:
        self.desk.deny_where(turn_id=turn_id, reason="worker_died")
        self.reorder.forget(turn_id)
        self.pool.finish(turn_id)
        rec = self.records.get_turn(turn_id)
        if rec is None or rec.state == TurnState.DONE:
            self.queue.release(turn_id)
            return
        self.queue.requeue(turn_id)
        rec.state, rec.worker, rec.incarnation = TurnState.QUEUED, None, None
        rec.input = {**rec.input, "_resume": True}
        rec.updated_at = self._wall()
        try:
            self.records.put_turn(rec)
        except GeodeError as exc:  # the in-memory queue still holds it; the next start re-derives it
            log.warning("cannot record re-queue of %s: %s", turn_id, exc)
        self._emit(rec.session_id, turn_id, lanes_msg.TURN_QUEUED, {"position": 0, "resume": True})

    def tick(self) -> None:
        """Periodic: reap silent workers, expire orphans, release held-back events, start turns."""
        with self._mu:
            for dead in self.pool.reap():
                self._requeue_dead(dead)
            now = self._clock()
            for turn_id, (_, _, deadline) in list(self._orphans.items()):
                if now >= deadline:
                    self._requeue_orphan(turn_id)
        for ev in self.reorder.flush():
            self._relay(ev)
        self.schedule()

    # --- streams ----------------------------------------------------------------------------------------
    def turn_event(self, ev: turns.TurnEvent, sender: str = "") -> None:
        owner = self.pool.owner_of(ev.turn_id)
        if owner is not None and sender and sender != owner.key and "#" in sender:
            return  # fenced: an older incarnation of a worker that no longer owns this turn
        for item in self.reorder.push(ev.turn_id, ev.seq, ev):
            self._relay(item)

    def _relay(self, ev: turns.TurnEvent) -> None:
        self._emit(ev.session_id, ev.turn_id, ev.kind.value, ev.data)

    def _emit(self, session_id: str, turn_id: str, kind: str, data: dict[str, Any]) -> lanes_msg.StreamEvent:
        out = self.stream.append(session_id, turn_id, kind, data)
        meta = self._meta.get(turn_id)
        if meta is not None and meta.origin:
            try:
                self.transport.cast(meta.origin, lanes_msg.ORIGIN_EVENT, out, session=session_id)
            except GeodeError as exc:  # the origin may be restarting; it re-attaches from the buffer
                log.debug("origin %s unreachable: %s", meta.origin, exc)
        return out

    def turn_done(self, done: turns.TurnDone) -> None:
        with self._mu:
            rec = self.records.get_turn(done.turn_id)
            if rec is None or rec.state == TurnState.DONE:
                return  # idempotent: a retried done changes nothing
            if rec.state == TurnState.RUNNING and done.worker and rec.worker and rec.worker != done.worker:
                return  # a stale report from a worker that lost the turn
            rec.state, rec.outcome = TurnState.DONE, done.result.model_dump(mode="json")
            rec.updated_at = self._wall()
            self.records.put_turn(rec)  # raises on store failure: the worker retries its done
            self._finish(rec)
        self.schedule()

    def _finish(self, rec: TurnRecord) -> None:
        for item in self.reorder.forget(rec.turn_id):
            self._relay(item)
        self.queue.release(rec.turn_id)
        self.pool.finish(rec.turn_id)
        self._orphans.pop(rec.turn_id, None)
        self.desk.deny_where(turn_id=rec.turn_id, reason="turn_ended")
        self._emit(rec.session_id, rec.turn_id, lanes_msg.TURN_DONE, {"result": rec.outcome or {}})
        recent = self._recent.setdefault(rec.session_id, [])
        recent.append({"turn_id": rec.turn_id, "state": rec.state.value, "outcome": rec.outcome})
        del recent[:-RECENT_OUTCOMES]
        self._recent.move_to_end(rec.session_id)
        while len(self._recent) > 256:
            self._recent.popitem(last=False)
        self._meta.pop(rec.turn_id, None)

    # --- cancel, approvals, replay, status -----------------------------------------------------------------
    def cancel(self, req: lanes_msg.Cancel) -> lanes_msg.Cancelled:
        with self._mu:
            turn_id = req.turn_id
            if turn_id is None and req.session_id:
                turn_id = self.queue.running_for(req.session_id)
            if turn_id is None:
                return lanes_msg.Cancelled(state="none")
            state = self.queue.state_of(turn_id)
            if state == "queued":
                self.queue.remove(turn_id)
                rec = self.records.get_turn(turn_id)
                if rec is not None:
                    rec.state, rec.outcome = TurnState.DONE, cancelled_result(req.reason)
                    rec.updated_at = self._wall()
                    self.records.put_turn(rec)
                    self._finish(rec)
                return lanes_msg.Cancelled(turn_id=turn_id, state="queued_cancelled")
            if state == "running":
                self.desk.deny_where(turn_id=turn_id, reason="cancelled")
                owner = self.pool.owner_of(turn_id)
                meta = self._meta.get(turn_id)
                if owner is not None:
                    self.transport.cast(
                        owner.name,
                        turns.TURN_CANCEL,
                        turns.TurnCancel(
                            turn_id=turn_id, session_id=meta.session_id if meta else None, reason=req.reason
                        ),
                    )
                return lanes_msg.Cancelled(turn_id=turn_id, state="cancellation_requested")
            return lanes_msg.Cancelled(turn_id=turn_id, state="already_done")

    def ask_approval(self, ask: lanes_msg.ApprovalAsk) -> lanes_msg.ApprovalDecision:
        """Blocks this handler until the origin decides (or timeout / disconnect / cancel → ``n``)."""
        with self._mu:
            meta = self._meta.get(ask.turn_id) if ask.turn_id else None
            if meta is None and ask.turn_id:
                rec = self.records.get_turn(ask.turn_id)
                meta = _Meta(rec.session_id, rec.origin, rec.mode) if rec else None
            if meta is None or not meta.origin or meta.mode not in ("IPC", "REPL"):
                return lanes_msg.ApprovalDecision(
                    approval_id=ask.approval_id, decision="n", reason="no_origin"
                )
            if not self.desk.open(
                ask.approval_id, session_id=ask.session_id, turn_id=ask.turn_id, origin=meta.origin
            ):
                return lanes_msg.ApprovalDecision(
                    approval_id=ask.approval_id, decision="n", reason="duplicate_or_full"
                )
            data = ask.model_dump(mode="json")
            self._emit(ask.session_id, ask.turn_id, lanes_msg.APPROVAL_REQUEST, data)
        return self.desk.wait(ask.approval_id, ask.timeout_s)

    def replay(self, r: lanes_msg.Replay) -> lanes_msg.Replayed:
        events, complete = self.stream.since(r.session_id, r.after_seq)
        with self._mu:
            outcomes = list(self._recent.get(r.session_id, ()))
            running = self.queue.running_for(r.session_id)
        if not complete or not outcomes:
            done = [
                t for t in self.records.list_turns(state=TurnState.DONE.value) if t.session_id == r.session_id
            ]
            seen = {o["turn_id"] for o in outcomes}
            outcomes = [
                {"turn_id": t.turn_id, "state": t.state.value, "outcome": t.outcome}
                for t in done[-RECENT_OUTCOMES:]
                if t.turn_id not in seen
            ] + outcomes
        return lanes_msg.Replayed(events=events, complete=complete, outcomes=outcomes, running=running)

    def status(self) -> dict[str, Any]:
        with self._mu:
            return {
                "lanes": self.queue.stats(),
                "workers": self.pool.snapshot(),
                "pending_approvals": len(self.desk.pending()),
                "orphans": sorted(self._orphans),
                "streams": self.stream.sessions(),
            }
