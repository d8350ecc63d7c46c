"""LanesService: admits turns into the one LaneQueue, runs them on the worker pool, relays their streams.

Single-threaded by contract: only its owner (the lanes actor, ``actors/lanes.py``) calls it, one message at a
time, and nothing here blocks; the one exception is the stream relay (``relay_event``, also run on the bus
thread as a worker's ``turn.event`` arrives: see ``geode/lanes/state.py``). A store round trip is handed to
the ``runner`` and the operation finishes in a continuation when the reply arrives, so one session's slow
write never holds up another session. A request is answered through ``Asked.answer`` when its operation
completes (a submit once its record is stored).

Durable turn records (queued → running on worker W incarnation N → done; a turn that can start at once is
stored running in its first write, and no read precedes it: the store returns a done record a put would
overwrite) make every restart safe: on start
queued records are queued again and running ones hold their lanes until their worker confirms them by
heartbeat, or are re-queued with ``resume`` after a grace period. A dead worker's turns are re-queued by the
supervision path (``runtime.child_died``, a new READY incarnation, or missed heartbeats), never by the
happy path. A state is stored before it is acted on: the running record before the turn is pushed to a
worker, the done record before the lane is released.
The worker pool's requests (ready, heartbeats, deaths, re-queues) are ``geode/lanes/worker_requests.py``.
"""

from __future__ import annotations

import logging
import os
from functools import cached_property, partial
from typing import Any

from geode.faults import fault
from geode.lanes import tracing
from geode.lanes.pool import once_per_worker
from geode.lanes.queue import Grant
from geode.lanes.records import Outcome
from geode.lanes.state import Asked, Fresh, Reply, copy_record, requeues_of
from geode.lanes.stream_relay import relay_events, send_events, send_stale_holds
from geode.lanes.worker_requests import WorkerRequests
from geode.metrics import record as metrics
from geode.protocol import lanes as lanes_msg
from geode.protocol import runtime, turns
from geode.protocol.dispatch import Dispatch
from geode.protocol.errors import BadRequest, GeodeError
from geode.records.models import TurnRecord, TurnState

log = logging.getLogger(__name__)
__all__ = ["Asked", "LanesService", "Reply"]


def _carries(s: lanes_msg.Submit) -> bool:
    """Whether the submit's reply carries the turn's first stream events (see ``Submit.reply_events``)."""
    return s.reply_events and bool(s.origin)


class LanesService(WorkerRequests):
    """The lanes state machine: admission, scheduling, the worker pool and turn streams; ``dispatch`` routes
    every lanes message (the actor calls :meth:`handle` once per message)."""

    @cached_property
    def dispatch(self) -> Dispatch:
        """The routing table (built once; the constructor is :class:`LanesState`'s, typed)."""
        routes: dict[str, Any] = {  # each handler takes (body, Asked) and answers through Asked.answer
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
        }
        return Dispatch("lanes", routes)

    # --- plumbing -------------------------------------------------------------------------------------
    def handle(self, request: Asked) -> None:
        """Route one request; its answer goes to ``request.answer`` (a raised error answers it too)."""
        try:
            self.dispatch.handle(request)
        except GeodeError as exc:
            request.answer(exc)

    # --- start-up -------------------------------------------------------------------------------------
    def load(self, running: list[TurnRecord], queued: list[TurnRecord]) -> dict[str, int]:
        """Adopt the durable records (read by the owner before it serves): queued ones queue again; running
        ones hold their lanes until their worker confirms them or the grace period ends."""
        deadline = self._clock() + self.orphan_grace_s
        for rec in running:
            self._recs[rec.turn_id] = rec
            self.queue.adopt_running(
                rec.turn_id, rec.session_id, first_at=self._first_at(rec), requeues=requeues_of(rec)
            )
            self._orphans[rec.turn_id] = (rec.worker, rec.incarnation, deadline)
        for rec in sorted(queued, key=lambda t: (t.created_at, t.turn_id)):
            self._recs[rec.turn_id] = rec
            self.queue.enqueue(
                rec.turn_id,
                rec.session_id,
                front=rec.resume,
                first_at=self._first_at(rec),
                requeues=requeues_of(rec),
            )
        self.schedule()
        return {"running": len(running), "queued": len(queued)}

    # --- admission ------------------------------------------------------------------------------------
    def submit(self, s: lanes_msg.Submit, r: Asked) -> None:
        """Answered once the turn's first record is stored: ``running`` when it started at once, else
        ``queued`` (or with the store's error, or the earlier run's state for a turn id that ran before)."""
        waiting = self._admitting.get(s.turn_id)
        if waiting is not None:  # a retry while the first attempt is being stored: answered with it
            waiting.append((s.session_id, r.answer))
            return
        rec = self._recs.get(s.turn_id)
        if rec is not None:  # an idempotent retry
            r.answer(self._submitted_again(s, rec))
            return
        self._admitting[s.turn_id] = [(s.session_id, r.answer)]
        self._admit(s, r.envelope.trace)

    def _submitted_again(self, s: lanes_msg.Submit, rec: TurnRecord) -> Reply | BaseException:
        if rec.session_id != s.session_id:
            return BadRequest(f"turn {s.turn_id} belongs to another session")
        events = None
        if s.reply_events:  # a retry (its first reply lost?): the turn's buffered events again, seq-deduped
            with self.stream_lock:
                events = [e for e in self.stream.since(s.session_id, 0)[0] if e.turn_id == s.turn_id] or None
        return lanes_msg.Submitted(
            turn_id=s.turn_id, session_id=s.session_id, state=rec.state.value, events=events
        )

    def _admitted(self, s: lanes_msg.Submit, out: Reply | BaseException) -> None:
        for session_id, answer in self._admitting.pop(s.turn_id, []):
            if session_id != s.session_id and not isinstance(out, BaseException):
                answer(BadRequest(f"turn {s.turn_id} belongs to another session"))
            else:
                answer(out)

    def _admit(self, s: lanes_msg.Submit, trace: str | None = None) -> None:
        """Queue the turn and store its first record: its running record when it can start at once (one
        write, not queued then running), else its queued record. No read first: the store keeps a done
        record final and returns it, so a turn id that ran before is answered from what the put returns."""
        try:
            position = self.queue.enqueue(s.turn_id, s.session_id, front=s.resume)
        except GeodeError as exc:
            self._admitted(s, exc)
            return
        now = self._wall()
        rec = TurnRecord(
            turn_id=s.turn_id,
            session_id=s.session_id,
            mode=s.mode,
            origin=s.origin,
            input=s.input,
            settings=s.settings,
            resume=s.resume,
            created_at=now,
            updated_at=now,
        )
        rec.trace = tracing.admitted(rec, trace)
        self._recs[s.turn_id] = rec
        self._fresh[s.turn_id] = (s, position)
        self.schedule()  # grants it if its lane, the cap and a worker allow: its first write is then running
        if self._fresh.pop(s.turn_id, None) is None:
            return
        self.queue.hold(s.turn_id)  # waits behind others: not granted before its queued record is stored
        self._put(rec, lambda out: self._queued(s, rec, position, out))

    def _queued(self, s: lanes_msg.Submit, rec: TurnRecord, position: int, out: Outcome) -> None:
        if isinstance(out, BaseException) or out.state == TurnState.DONE:  # failed, or it ran before
            if self._recs.get(s.turn_id) is rec:
                self._recs.pop(s.turn_id, None)
                self.queue.remove(s.turn_id, missing_ok=True)
            self._admitted(s, out if isinstance(out, BaseException) else self._submitted_again(s, out))
            return
        carried = None
        if self._recs.get(s.turn_id) is rec and self.queue.unhold(s.turn_id):
            carried = self._queued_event(s, position)
        reply = lanes_msg.Submitted(
            turn_id=s.turn_id, session_id=s.session_id, state="queued", position=position, events=carried
        )
        self._admitted(s, reply)
        self.schedule()

    def _first_stored(self, s: lanes_msg.Submit, position: int, current: bool, out: Outcome) -> bool:
        """A turn that started at once: its running record (its first) is stored, or failed, or the store
        returned the done record of an earlier run. Answers the submit; True when the turn is pushed now."""
        turn_id = s.turn_id
        if isinstance(out, BaseException) or out.state == TurnState.DONE:
            self.pool.finish(turn_id)  # nothing of it is durable (or it ran before): forget it everywhere
            if not self.queue.release(turn_id):  # re-queued (held) while its record was stored
                self.queue.remove(turn_id, missing_ok=True)
            self._starting.pop(turn_id, None)
            self._recs.pop(turn_id, None)
            self._admitted(s, out if isinstance(out, BaseException) else self._submitted_again(s, out))
            self.schedule()
            return False
        carried = None
        if not current and turn_id in self._recs and self.queue.unhold(turn_id):
            carried = self._queued_event(s, position)
        if current and _carries(s):
            return True  # answered by _started with its queued and started events (_answer_started)
        state = "running" if current else "queued"  # current: its queued event goes with its started one
        reply = lanes_msg.Submitted(turn_id=turn_id, session_id=s.session_id, state=state, events=carried)
        self._admitted(s, reply)
        if not current:
            self.schedule()
        return current

    def schedule(self) -> int:
        """Start every turn the lanes and the free workers allow: each one's running record is stored
        before it is pushed to its worker. Returns how many started."""
        started = 0
        self._start_failed = False
        self.follow_capacity()  # every pool change (ready, death, silence) ends in a schedule
        routable = once_per_worker(self.routable)  # asked once per worker per schedule, not per check
        while not self._start_failed and self.pool.free_slots(routable) > 0:
            grants = self.queue.grant(limit=1)
            if not grants:
                break
            g = grants[0]
            rec = self._recs.get(g.turn_id)
            # a session's turns go to the worker of its last turn when it is free: that worker holds the
            # session's history from its own last save (geode/loop/checkpoint.py) and reads no message again
            worker = self.pool.pick(routable, prefer=self._ran_on.get(rec.session_id) if rec else None)
            if worker is None or rec is None:
                if rec is not None:  # no worker after all: back to the head of its lane, not a loss
                    self.queue.requeue(g.turn_id, lost=False)
                else:
                    self.queue.release(g.turn_id)  # no record (it was dropped): drop the turn
                break
            rec.state, rec.worker, rec.incarnation = TurnState.RUNNING, worker.name, worker.incarnation
            self._ran_on.pop(rec.session_id, None)
            self._ran_on[rec.session_id] = worker.name
            if len(self._ran_on) > 1024:
                self._ran_on.popitem(last=False)
            rec.attempts += 1
            rec.updated_at = self._wall()
            self.pool.assign(worker.name, g.turn_id)  # the slot is taken now, pushed once stored
            self._starting[g.turn_id] = False
            started += 1
            self._put(
                rec, partial(self._started, g, worker.key, rec.attempts, self._fresh.pop(g.turn_id, None))
            )
        metrics.lane_queue(len(self.queue.queued()))
        return started

    def _started(self, g: Grant, worker_key: str, attempt: int, fresh: Fresh | None, out: Outcome) -> None:
        """The running record is stored (``fresh``: the turn's first record; its submit is answered here)."""
        cancel = self._starting.pop(g.turn_id, False)
        rec = self._recs.get(g.turn_id)
        owner = self.pool.owner_of(g.turn_id)
        current = not (rec is None or rec.attempts != attempt or owner is None or owner.key != worker_key)
        if fresh is not None and not self._first_stored(*fresh, current, out):
            return
        if rec is None or owner is None or not current:
            return  # superseded while the record was stored (its worker died, it was re-queued)
        if isinstance(out, BaseException):
            log.warning("cannot record turn %s as running: %s", g.turn_id, out)
            self.pool.finish(g.turn_id)
            self.queue.requeue(g.turn_id, lost=False)
            rec.state, rec.worker, rec.incarnation = TurnState.QUEUED, None, None
            rec.attempts -= 1
            self._start_failed = True  # the tick tries again
            return
        resume = rec.resume or rec.attempts > 1
        started = {
            "worker": owner.name,
            "waited_s": round(g.waited_s, 4),
            "age_s": round(g.age_s, 3),
            "requeues": g.requeues,
            "resume": resume,
        }
        queued = [] if fresh is None else [(lanes_msg.TURN_QUEUED, {"position": fresh[1]})]
        items: list[tuple[str, dict[str, Any]]] = [*queued, (lanes_msg.TURN_STARTED, started)]
        carried = fresh is not None and _carries(fresh[0]) and self._answer_started(fresh[0], rec, items)
        fault("lanes.after_turn_stored")  # the running record is stored; the turn is not pushed yet
        metrics.admission_wait(g.waited_s)
        self.pool.assign(owner.name, g.turn_id)  # its lost-run grace counts from the push, not the slow write
        if not carried:
            self._emit_all(rec.session_id, rec.turn_id, items)
        with tracing.pushing(rec, g, owner.key, resume):
            self._send_run(owner.name, rec, resume)
        log.info(
            "turn %s pushed to %s (attempt %d%s, age %.2fs)",
            rec.turn_id,
            owner.key,
            rec.attempts,
            ", resume" if resume else "",
            g.age_s,
        )
        if cancel:
            self._send_cancel(owner.name, rec, "user")

    def _queued_event(self, s: lanes_msg.Submit, position: int) -> list[lanes_msg.StreamEvent] | None:
        """A turn that waits: its ``turn_queued``, numbered and buffered, for an origin that takes it in the
        submit's reply returned (what the session holds for it sent first, as in :meth:`_answer_started`;
        a frame fewer per queued turn), else sent as before."""
        if not _carries(s):
            self._emit(s.session_id, s.turn_id, lanes_msg.TURN_QUEUED, {"position": position})
            return None
        with self.stream_lock:
            send_events(self, s.origin, s.session_id, [])
            return [
                self.stream.append(s.session_id, s.turn_id, lanes_msg.TURN_QUEUED, {"position": position})
            ]

    def _answer_started(
        self, s: lanes_msg.Submit, rec: TurnRecord, items: list[tuple[str, dict[str, Any]]]
    ) -> bool:
        """A turn that started at once, for an origin that takes its first events in the submit's reply:
        they are numbered and buffered as :meth:`_emit_all` does, and go in the reply, not in a frame of their
        own (issue 34 session 6: a frame fewer per turn in lanes and at the origin). What the session holds
        for that origin is sent first, so its seqs stay in order."""
        with self.stream_lock:
            send_events(self, rec.origin, rec.session_id, [])
            outs = [self.stream.append(rec.session_id, rec.turn_id, kind, data) for kind, data in items]
        reply = lanes_msg.Submitted(turn_id=s.turn_id, session_id=s.session_id, state="running", events=outs)
        self._admitted(s, reply)
        return True

    def tick(self) -> None:
        """Periodic: reap silent workers, expire orphans and approvals, release held-back events, start."""
        for dead in self.pool.reap():
            self._requeue_dead(dead, f"silent for {self.pool.expiry_s:g}s")
        now = self._clock()
        for turn_id, (_, _, deadline) in list(self._orphans.items()):
            if now >= deadline:
                self._requeue_orphan(turn_id, f"unconfirmed for {self.orphan_grace_s:g}s")
        self.desk.expire(now)
        with self.stream_lock:
            for ev in self.reorder.flush():
                self._relay(ev)
            send_stale_holds(self, self._clock())
        self.schedule()

    # --- streams ----------------------------------------------------------------------------------------
    def turn_event(self, ev: turns.TurnEvent, r: Asked) -> None:
        """Through the actor (tests, a relay the bus did not run inline): the same as the bus thread's."""
        self.relay_event(ev, r.sender)
        r.answer(None)

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
        if done.events:  # the turn's last events, as a turn.events frame's (a retried done's: dropped by seq)
            relay_events(self, done.events, r.sender)
        final = copy_record(rec)
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
