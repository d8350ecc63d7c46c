"""LanesService: admits turns into the one LaneQueue, runs them on the worker pool, relays their streams.

Single-threaded by contract: only its owner (the lanes actor, ``actors/lanes.py``) calls it, one message at a
time, and nothing here blocks. A store round trip is handed to the ``runner`` and the operation finishes in a
continuation when the reply arrives, so one session's slow write never holds up another session. A request
is answered through ``Asked.answer`` when its operation completes (a submit once its record is stored).

Durable turn records (queued → running on worker W incarnation N → done) make every restart safe: on start
queued records are queued again and running ones hold their lanes until their worker confirms them by
heartbeat, or are re-queued with ``resume`` after a grace period. A dead worker's turns are re-queued by the
supervision path (``runtime.child_died``, a new READY incarnation, or missed heartbeats), never by the
happy path. A state is stored before it is acted on: the running record before the turn is pushed to a
worker, the done record before the lane is released.
"""

from __future__ import annotations

import logging
import os
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from geode.lanes.approvals import ApprovalDesk
from geode.lanes.pool import DeadWorker, WorkerPool
from geode.lanes.queue import Grant, LaneQueue
from geode.lanes.records import Outcome, StoreRunner, TurnStore, inline_runner
from geode.lanes.stream import Reorder, StreamBuffer
from geode.protocol import lanes as lanes_msg
from geode.protocol import runtime, turns
from geode.protocol.dispatch import Dispatch
from geode.protocol.errors import BadRequest, GeodeError
from geode.protocol.transport import Request
from geode.records.models import TurnRecord, TurnState

log = logging.getLogger(__name__)
ORPHAN_GRACE_S = 3.0
LOST_RUN_GRACE_S = 3.0  # a turn.run its worker never reported in a heartbeat after this long was lost
RECENT_OUTCOMES = 8
INTERACTIVE = ("IPC", "REPL")

Reply = BaseModel | dict[str, Any] | None
Answer = Callable[[Reply | BaseException], None]


def _drop(_: object) -> None:
    """The answer of a cast: nobody waits for it."""


@dataclass(frozen=True)
class Asked(Request):
    """A request plus the callback that answers it, now or from a continuation (exactly once)."""

    answer: Answer = _drop


def cancelled_result(reason: str = "user") -> dict[str, Any]:
    return turns.TurnResult(
        termination_reason=turns.TerminationReason.USER_CANCELLED,
        error=f"cancelled before it started ({reason}); completed side effects remain in place",
    ).model_dump(mode="json")


def _copy(rec: TurnRecord) -> TurnRecord:
    return rec.model_copy(deep=True)


class LanesService:
    """The lanes state machine: queue, pool, approvals, streams and the active turns' records."""

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
    ) -> None:
        self.name, self.incarnation = name, incarnation
        self.records = records  # blocking calls: only ever made through ``runner``
        self.runner = runner
        self.transport = transport  # casts only (they never wait for another process)
        self.queue = queue or LaneQueue()
        self.pool = pool or WorkerPool(clock=clock)
        self.stream = stream or StreamBuffer()
        self.desk = ApprovalDesk(max_pending_approvals)  # each pending approval holds one bus handler thread
        self.reorder = Reorder()
        self.orphan_grace_s = orphan_grace_s
        self.routable = routable  # is a worker reachable yet (its peer hello arrived)? None: always
        self.lost_run_grace_s = lost_run_grace_s
        self._clock, self._wall = clock, wall
        self._recs: dict[str, TurnRecord] = {}  # every queued or running turn's record, as last stored
        self._admitting: dict[str, list[tuple[str, Answer]]] = {}  # turn → (session, answer) awaiting store
        self._finishing: dict[str, list[Answer]] = {}  # turn → turn.done answers awaiting its done record
        self._starting: dict[str, bool] = {}  # turn → cancel once pushed (its running record is in flight)
        self._orphans: dict[str, tuple[str | None, int | None, float]] = {}
        self._recent: OrderedDict[str, list[dict[str, Any]]] = OrderedDict()
        self._start_failed = False
        self.inflight = 0  # store round trips issued and not yet continued
        self.dispatch = Dispatch(
            "lanes",
            {
                lanes_msg.SUBMIT: self.submit,
                lanes_msg.CANCEL: self.cancel,
                lanes_msg.APPROVAL: self.ask_approval,
                lanes_msg.APPROVAL_REPLY: self.approval_reply,
                lanes_msg.REPLAY: self.replay,
                lanes_msg.LANES_STATUS: lambda b, r: r.answer(self.status()),
                runtime.STATUS: lambda b, r: r.answer(
                    runtime.StatusReply(
                        name=self.name, incarnation=self.incarnation, pid=os.getpid(), detail=self.status()
                    )
                ),
                lanes_msg.TURN: self.turn,
                turns.WORKER_READY: self.worker_ready,
                turns.WORKER_HEARTBEAT: self.heartbeat,
                turns.TURN_EVENT: self.turn_event,
                turns.TURN_DONE: self.turn_done,
                runtime.CHILD_DIED: self.child_died,
                runtime.PING: lambda b, r: r.answer(
                    runtime.Pong(name=self.name, incarnation=self.incarnation, pid=os.getpid())
                ),
            },
        )

    # --- plumbing -------------------------------------------------------------------------------------
    def handle(self, request: Asked) -> None:
        """Route one request; its answer goes to ``request.answer`` (a raised error answers it too)."""
        try:
            self.dispatch.handle(request)
        except GeodeError as exc:
            request.answer(exc)

    def _io(self, key: str, call: Callable[[], Any], then: Callable[[Outcome], None]) -> None:
        """One store round trip, continued by ``then`` on this state machine's thread."""
        self.inflight += 1

        def done(out: Outcome) -> None:
            self.inflight -= 1
            then(out)

        self.runner(key, call, done)

    def _put(self, rec: TurnRecord, then: Callable[[Outcome], None]) -> None:
        snapshot = _copy(rec)  # the store call runs elsewhere; our copy may change meanwhile
        self._io(rec.turn_id, lambda: self.records.put_turn(snapshot), then)

    # --- start-up -------------------------------------------------------------------------------------
    def load(self, running: list[TurnRecord], queued: list[TurnRecord]) -> dict[str, int]:
        """Adopt the durable records (read by the owner before it serves): queued ones queue again; running
        ones hold their lanes until their worker confirms them or the grace period ends."""
        deadline = self._clock() + self.orphan_grace_s
        for rec in running:
            self._recs[rec.turn_id] = rec
            self.queue.adopt_running(rec.turn_id, rec.session_id)
            self._orphans[rec.turn_id] = (rec.worker, rec.incarnation, deadline)
        for rec in queued:
            self._recs[rec.turn_id] = rec
            self.queue.enqueue(rec.turn_id, rec.session_id, front=bool(rec.input.get("_resume")))
        self.schedule()
        return {"running": len(running), "queued": len(queued)}

    # --- admission ------------------------------------------------------------------------------------
    def submit(self, s: lanes_msg.Submit, r: Asked) -> None:
        """Answered ``queued`` once the turn's record is stored (or with the store's error)."""
        waiting = self._admitting.get(s.turn_id)
        if waiting is not None:  # a retry while the first attempt is being stored: answered with it
            waiting.append((s.session_id, r.answer))
            return
        rec = self._recs.get(s.turn_id)
        if rec is not None:  # an idempotent retry
            r.answer(self._submitted_again(s, rec))
            return
        self._admitting[s.turn_id] = [(s.session_id, r.answer)]
        self._io(s.turn_id, lambda: self.records.get_turn(s.turn_id), lambda out: self._admit(s, out))

    def _submitted_again(self, s: lanes_msg.Submit, rec: TurnRecord) -> Reply | BaseException:
        if rec.session_id != s.session_id:
            return BadRequest(f"turn {s.turn_id} belongs to another session")
        return lanes_msg.Submitted(turn_id=s.turn_id, session_id=s.session_id, state=rec.state.value)

    def _admitted(self, s: lanes_msg.Submit, out: Reply | BaseException) -> None:
        for session_id, answer in self._admitting.pop(s.turn_id, []):
            if session_id != s.session_id and not isinstance(out, BaseException):
                answer(BadRequest(f"turn {s.turn_id} belongs to another session"))
            else:
                answer(out)

    def _admit(self, s: lanes_msg.Submit, existing: Outcome) -> None:
        if isinstance(existing, BaseException):
            self._admitted(s, existing)
            return
        if existing is not None:  # stored before (a retry after it finished, or after a restart)
            self._admitted(s, self._submitted_again(s, existing))
            return
        try:
            position = self.queue.enqueue(s.turn_id, s.session_id, front=s.resume, held=True)
        except GeodeError as exc:
            self._admitted(s, exc)
            return
        now = self._wall()
        rec = TurnRecord(
            turn_id=s.turn_id,
            session_id=s.session_id,
            mode=s.mode,
            origin=s.origin,
            input={**s.input, "_settings": s.settings, "_resume": s.resume},
            created_at=now,
            updated_at=now,
        )
        self._recs[s.turn_id] = rec
        self._put(rec, lambda out: self._queued(s, rec, position, out))

    def _queued(self, s: lanes_msg.Submit, rec: TurnRecord, position: int, out: Outcome) -> None:
        if isinstance(out, BaseException):
            if self._recs.get(s.turn_id) is rec:
                self._recs.pop(s.turn_id, None)
                self.queue.remove(s.turn_id, missing_ok=True)
            self._admitted(s, out)
            return
        if self._recs.get(s.turn_id) is rec and self.queue.unhold(s.turn_id):
            self._emit(s.session_id, s.turn_id, lanes_msg.TURN_QUEUED, {"position": position})
        self._admitted(
            s,
            lanes_msg.Submitted(
                turn_id=s.turn_id, session_id=s.session_id, state="queued", position=position
            ),
        )
        self.schedule()

    def schedule(self) -> int:
        """Start every turn the lanes and the free workers allow: each one's running record is stored
        before it is pushed to its worker. Returns how many started."""
        started = 0
        self._start_failed = False
        while not self._start_failed and self.pool.free_slots(self.routable) > 0:
            grants = self.queue.grant(limit=1)
            if not grants:
                break
            g = grants[0]
            worker = self.pool.pick(self.routable)
            rec = self._recs.get(g.turn_id)
            if worker is None or rec is None:
                if rec is not None:
                    self.queue.requeue(g.turn_id)  # no worker after all: back to the head of its lane
                else:
                    self.queue.release(g.turn_id)  # no record (it was dropped): drop the turn
                break
            rec.state, rec.worker, rec.incarnation = TurnState.RUNNING, worker.name, worker.incarnation
            rec.attempts += 1
            rec.updated_at = self._wall()
            self.pool.assign(worker.name, g.turn_id)  # the slot is taken now, pushed once stored
            self._starting[g.turn_id] = False
            started += 1
            self._put(rec, lambda out, g=g, key=worker.key, n=rec.attempts: self._started(g, key, n, out))
        return started

    def _started(self, g: Grant, worker_key: str, attempt: int, out: Outcome) -> None:
        cancel = self._starting.pop(g.turn_id, False)
        rec = self._recs.get(g.turn_id)
        owner = self.pool.owner_of(g.turn_id)
        if rec is None or rec.attempts != attempt or owner is None or owner.key != worker_key:
            return  # superseded while the record was stored (its worker died, it was re-queued)
        if isinstance(out, BaseException):
            log.warning("cannot record turn %s as running: %s", g.turn_id, out)
            self.pool.finish(g.turn_id)
            self.queue.requeue(g.turn_id)
            rec.state, rec.worker, rec.incarnation = TurnState.QUEUED, None, None
            rec.attempts -= 1
            self._start_failed = True  # the tick tries again
            return
        resume = bool(rec.input.get("_resume")) or rec.attempts > 1
        self._emit(
            rec.session_id,
            rec.turn_id,
            lanes_msg.TURN_STARTED,
            {"worker": owner.name, "waited_s": round(g.waited_s, 4), "resume": resume},
        )
        self._send_run(owner.name, rec, resume)
        if cancel:
            self._send_cancel(owner.name, rec, "user")

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
        self.transport.cast(worker, turns.TURN_RUN, run, session=rec.session_id)

    def _send_cancel(self, worker: str, rec: TurnRecord | None, reason: str) -> None:
        if rec is None:
            return
        cancel = turns.TurnCancel(turn_id=rec.turn_id, session_id=rec.session_id, reason=reason)
        self.transport.cast(worker, turns.TURN_CANCEL, cancel)

    # --- worker pool ---------------------------------------------------------------------------------
    def worker_ready(self, b: turns.WorkerReady, r: Asked) -> None:
        dead = self.pool.ready(b.worker, b.incarnation, b.capacity)
        if dead is not None:
            self._requeue_dead(dead)
        for turn_id, (w, inc, _) in list(self._orphans.items()):
            if w == b.worker and inc != b.incarnation:  # its worker restarted: the turn will not come back
                self._requeue_orphan(turn_id)
        r.answer(turns.Ack())
        self.schedule()

    def heartbeat(self, hb: turns.WorkerHeartbeat, r: Asked) -> None:
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
            if turn_id not in self._starting:
                log.warning("turn %s never reached %s; re-queueing it", turn_id, hb.worker)
                self._requeue(turn_id)
        r.answer(turns.Ack(ok=True))
        self.schedule()

    def child_died(self, b: runtime.ChildDied, r: Asked) -> None:
        """Supervision path: release a dead worker's lanes and re-queue its turns; deny its origin's asks."""
        dead = self.pool.died(b.name, b.incarnation)
        if dead is not None:
            self._requeue_dead(dead)
        for turn_id, (w, inc, _) in list(self._orphans.items()):
            if w == b.name and inc == b.incarnation:
                self._requeue_orphan(turn_id)
        self.desk.deny_where(origin=b.name, reason="disconnect")
        r.answer(runtime.Ack())
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
        self._starting.pop(turn_id, None)
        rec = self._recs.get(turn_id)
        if turn_id in self._finishing:
            return  # its done record is being stored: it ended, nothing to run again
        if rec is None or rec.state == TurnState.DONE:
            self.queue.release(turn_id)
            return
        self.queue.requeue(turn_id)
        rec.state, rec.worker, rec.incarnation = TurnState.QUEUED, None, None
        rec.input = {**rec.input, "_resume": True}
        rec.updated_at = self._wall()
        # the in-memory queue holds it either way; if this write fails the next start re-derives it
        self._put(rec, lambda out: self._log_failed(f"re-queue of {turn_id}", out))
        self._emit(rec.session_id, turn_id, lanes_msg.TURN_QUEUED, {"position": 0, "resume": True})

    @staticmethod
    def _log_failed(what: str, out: Outcome) -> None:
        if isinstance(out, BaseException):
            log.warning("cannot record %s: %s", what, out)

    def tick(self) -> None:
        """Periodic: reap silent workers, expire orphans and approvals, release held-back events, start."""
        for dead in self.pool.reap():
            self._requeue_dead(dead)
        now = self._clock()
        for turn_id, (_, _, deadline) in list(self._orphans.items()):
            if now >= deadline:
                self._requeue_orphan(turn_id)
        self.desk.expire(now)
        for ev in self.reorder.flush():
            self._relay(ev)
        self.schedule()

    # --- streams ----------------------------------------------------------------------------------------
    def turn_event(self, ev: turns.TurnEvent, r: Asked) -> None:
        owner = self.pool.owner_of(ev.turn_id)
        fenced = owner is not None and r.sender and r.sender != owner.key and "#" in r.sender
        if not fenced:  # else: an older incarnation of a worker that no longer owns this turn
            for item in self.reorder.push(ev.turn_id, ev.seq, ev):
                self._relay(item)
        r.answer(None)

    def _relay(self, ev: turns.TurnEvent) -> None:
        self._emit(ev.session_id, ev.turn_id, ev.kind.value, ev.data)

    def _emit(self, session_id: str, turn_id: str, kind: str, data: dict[str, Any]) -> lanes_msg.StreamEvent:
        out = self.stream.append(session_id, turn_id, kind, data)
        rec = self._recs.get(turn_id)
        if rec is not None and rec.origin:
            try:
                self.transport.cast(rec.origin, lanes_msg.ORIGIN_EVENT, out, session=session_id)
            except GeodeError as exc:  # the origin may be restarting; it re-attaches from the buffer
                log.debug("origin %s unreachable: %s", rec.origin, exc)
        return out

    def turn_done(self, done: turns.TurnDone, r: Asked) -> None:
        """Answered once the done record is stored; a store failure answers an error (the worker retries)."""
        waiting = self._finishing.get(done.turn_id)
        if waiting is not None:
            waiting.append(r.answer)
            return
        rec = self._recs.get(done.turn_id)
        if rec is None or rec.state == TurnState.DONE:
            r.answer(turns.Ack())  # idempotent: a retried done changes nothing
            return
        if rec.state == TurnState.RUNNING and done.worker and rec.worker and rec.worker != done.worker:
            r.answer(turns.Ack())  # a stale report from a worker that lost the turn
            return
        final = _copy(rec)
        final.state, final.outcome = TurnState.DONE, done.result.model_dump(mode="json")
        final.updated_at = self._wall()
        self._finishing[done.turn_id] = [r.answer]
        self._put(final, lambda out: self._done_stored(final, out))

    def _done_stored(self, final: TurnRecord, out: Outcome) -> None:
        answers = self._finishing.pop(final.turn_id, [])
        if isinstance(out, BaseException):
            if self.pool.owner_of(final.turn_id) is None and final.turn_id in self._recs:
                self._requeue(final.turn_id)  # its worker died meanwhile and nobody will retry the done
            for answer in answers:
                answer(out)
            return
        if final.turn_id in self._recs:
            self._recs[final.turn_id] = final
            self._finish(final)
        for answer in answers:
            answer(turns.Ack())
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
        self._recs.pop(rec.turn_id, None)

    # --- cancel, approvals, replay, status -----------------------------------------------------------------
    def cancel(self, req: lanes_msg.Cancel, r: Asked) -> None:
        turn_id = req.turn_id
        if turn_id is None and req.session_id:
            turn_id = self.queue.running_for(req.session_id)
        if turn_id is None:
            r.answer(lanes_msg.Cancelled(state="none"))
            return
        state = self.queue.state_of(turn_id)
        rec = self._recs.get(turn_id)
        if state == "queued" and turn_id not in self._finishing:
            self.queue.remove(turn_id)
            if rec is None:
                r.answer(lanes_msg.Cancelled(turn_id=turn_id, state="queued_cancelled"))
                return
            final = _copy(rec)
            final.state, final.outcome = TurnState.DONE, cancelled_result(req.reason)
            final.updated_at = self._wall()
            rec.state = TurnState.DONE  # no other path may start or re-queue it meanwhile
            self._finishing[turn_id] = []
            self._put(final, lambda out: self._cancel_stored(final, out, r))
            return
        if state == "running" and turn_id not in self._finishing:
            self.desk.deny_where(turn_id=turn_id, reason="cancelled")
            owner = self.pool.owner_of(turn_id)
            if turn_id in self._starting:
                self._starting[turn_id] = True  # pushed once its running record is stored, then cancelled
            elif owner is not None:
                self._send_cancel(owner.name, rec, req.reason)
            r.answer(lanes_msg.Cancelled(turn_id=turn_id, state="cancellation_requested"))
            return
        r.answer(lanes_msg.Cancelled(turn_id=turn_id, state="already_done"))

    def _cancel_stored(self, final: TurnRecord, out: Outcome, r: Asked) -> None:
        answers = self._finishing.pop(final.turn_id, [])
        if isinstance(out, BaseException):
            self._recs.pop(final.turn_id, None)  # out of the queue; the next start re-derives it
            r.answer(out)
        else:
            self._recs[final.turn_id] = final
            self._finish(final)
            r.answer(lanes_msg.Cancelled(turn_id=final.turn_id, state="queued_cancelled"))
        for answer in answers:
            answer(turns.Ack())

    def ask_approval(self, ask: lanes_msg.ApprovalAsk, r: Asked) -> None:
        """Answered when the origin decides (timeout / disconnect / cancel: ``n``); nothing waits here."""
        rec = self._recs.get(ask.turn_id) if ask.turn_id else None
        if rec is None or not rec.origin or rec.mode not in INTERACTIVE:
            r.answer(
                lanes_msg.ApprovalDecision(approval_id=ask.approval_id, decision="n", reason="no_origin")
            )
            return
        opened = self.desk.open(
            ask.approval_id,
            session_id=ask.session_id,
            turn_id=ask.turn_id,
            origin=rec.origin,
            deadline=self._clock() + ask.timeout_s,
            then=r.answer,
        )
        if not opened:
            r.answer(
                lanes_msg.ApprovalDecision(
                    approval_id=ask.approval_id, decision="n", reason="duplicate_or_full"
                )
            )
            return
        self._emit(ask.session_id, ask.turn_id, lanes_msg.APPROVAL_REQUEST, ask.model_dump(mode="json"))

    def approval_reply(self, b: lanes_msg.ApprovalReply, r: Asked) -> None:
        peer = r.sender.split("#", 1)[0]  # only the turn's origin peer may answer (its name, sans "#inc")
        r.answer(lanes_msg.Ok(ok=self.desk.answer(b.approval_id, b.decision, origin=peer, note=b.note)))

    def replay(self, q: lanes_msg.Replay, r: Asked) -> None:
        events, complete = self.stream.since(q.session_id, q.after_seq)
        outcomes = list(self._recent.get(q.session_id, ()))
        running = self.queue.running_for(q.session_id)
        if complete and outcomes:
            r.answer(lanes_msg.Replayed(events=events, complete=True, outcomes=outcomes, running=running))
            return

        def with_done(out: Outcome) -> None:
            if isinstance(out, BaseException):
                r.answer(out)
                return
            seen = {o["turn_id"] for o in outcomes}
            done = [t for t in out if t.session_id == q.session_id]
            older = [
                {"turn_id": t.turn_id, "state": t.state.value, "outcome": t.outcome}
                for t in done[-RECENT_OUTCOMES:]
                if t.turn_id not in seen
            ]
            r.answer(
                lanes_msg.Replayed(
                    events=events, complete=complete, outcomes=older + outcomes, running=running
                )
            )

        self._io(q.session_id, lambda: self.records.list_turns(state=TurnState.DONE.value), with_done)

    def turn(self, q: lanes_msg.TurnQuery, r: Asked) -> None:
        rec = self._recs.get(q.turn_id)
        if rec is not None and q.turn_id not in self._admitting:
            r.answer(rec.model_dump(mode="json"))
            return

        def found(out: Outcome) -> None:
            r.answer(out if isinstance(out, BaseException) else (out.model_dump(mode="json") if out else {}))

        self._io(q.turn_id, lambda: self.records.get_turn(q.turn_id), found)

    def status(self) -> dict[str, Any]:
        return {
            "lanes": self.queue.stats(),
            "workers": self.pool.snapshot(),
            "pending_approvals": len(self.desk.pending()),
            "orphans": sorted(self._orphans),
            "streams": self.stream.sessions(),
            "store_inflight": self.inflight,
        }
