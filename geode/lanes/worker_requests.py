"""The lanes worker pool's side: ``worker.ready``, heartbeats (adopting or pushing again the orphans a
restarted lanes found running) and ``runtime.child_died``; a lost worker's turns go back to the head of their
lanes, or end ``worker_lost`` after ``max_requeues`` losses."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from geode.lanes.pool import DeadWorker
from geode.lanes.records import Outcome
from geode.lanes.requests import OriginRequests
from geode.lanes.state import Asked, copy_record, requeues_of
from geode.protocol import lanes as lanes_msg
from geode.protocol import runtime, turns
from geode.protocol.errors import GeodeError
from geode.records.models import TurnRecord, TurnState

log = logging.getLogger("geode.lanes.service")


def worker_lost_result(losses: int) -> dict[str, Any]:
    return turns.TurnResult(
        termination_reason=turns.TerminationReason.WORKER_LOST,
        error=f"its loop worker was lost {losses} times; not started again (completed side effects remain)",
    ).model_dump(mode="json")


class WorkerRequests(OriginRequests):
    """The worker-side requests of the lanes state machine."""

    if TYPE_CHECKING:  # defined by LanesService

        def schedule(self) -> int: ...

    def worker_ready(self, b: turns.WorkerReady, r: Asked) -> None:
        if self.pool.is_dead(b.worker, b.incarnation):  # a late READY of a dead incarnation: never pushed to
            log.info("ignoring READY of %s#%s: that incarnation is dead", b.worker, b.incarnation)
            r.answer(turns.Ack())
            return
        dead = self.pool.ready(b.worker, b.incarnation, b.capacity, b.address)
        if dead is not None:
            self._requeue_dead(dead, "a new incarnation is ready")
        for turn_id, (w, inc, _) in list(self._orphans.items()):
            if w == b.worker and inc != b.incarnation:  # its worker restarted: the turn will not come back
                self._requeue_orphan(turn_id, "its worker restarted")
        r.answer(turns.Ack())
        self.schedule()

    def heartbeat(self, hb: turns.WorkerHeartbeat, r: Asked) -> None:
        if self.pool.is_dead(hb.worker, hb.incarnation):  # a late heartbeat of a dead incarnation
            r.answer(turns.HeartbeatAck(ok=False))
            return
        if not self.pool.heartbeat(hb.worker, hb.incarnation):  # unknown (lanes restarted): register
            dead = self.pool.ready(hb.worker, hb.incarnation, max(1, len(hb.running) + hb.free))
            if dead is not None:
                self._requeue_dead(dead, "a new incarnation heartbeats")
        for turn_id in hb.running:
            orphan = self._orphans.get(turn_id)
            if orphan and orphan[0] == hb.worker and orphan[1] == hb.incarnation:
                del self._orphans[turn_id]
                self.pool.assign(hb.worker, turn_id)  # still running there: adopt it
        for turn_id, (w, inc, _) in list(self._orphans.items()):
            if w == hb.worker and inc == hb.incarnation and turn_id not in hb.running:
                self._push_orphan_again(turn_id, hb.worker)
        for turn_id in self.pool.unconfirmed(hb.worker, hb.running, self.lost_run_grace_s):
            if turn_id not in self._starting:
                log.warning(
                    "turn %s never reached %s (lost run after %gs); re-queueing it",
                    turn_id,
                    hb.worker,
                    self.lost_run_grace_s,
                )
                self._requeue(turn_id)
        r.answer(turns.HeartbeatAck(ok=True, catalogue=self.catalogue_stamp))
        self.schedule()

    def child_died(self, b: runtime.ChildDied, r: Asked) -> None:
        """Supervision path: release a dead worker's lanes and re-queue its turns; deny its origin's asks."""
        dead = self.pool.died(b.name, b.incarnation)
        if dead is not None:
            self._requeue_dead(dead, "the supervisor reported its death")
        for turn_id, (w, inc, _) in list(self._orphans.items()):
            if w == b.name and inc == b.incarnation:
                self._requeue_orphan(turn_id, "the supervisor reported its worker's death")
        self.desk.deny_where(origin=b.name, reason="disconnect")
        r.answer(runtime.Ack())
        self.schedule()

    def _requeue_dead(self, dead: DeadWorker, why: str) -> None:
        log.warning(
            "worker %s#%s is gone (%s); re-queueing %s", dead.name, dead.incarnation, why, list(dead.turns)
        )
        for turn_id in dead.turns:
            self._requeue(turn_id)

    def _push_orphan_again(self, turn_id: str, worker: str) -> None:
        """The orphan's worker is alive and does not run it: the push died with the previous lanes. Push it to
        that same worker again at once, resuming from its checkpoint, instead of waiting out the orphan grace.
        ``turn.run`` is idempotent by turn id there, so a push of the previous lanes still on its way starts
        nothing twice; a push lost again is re-queued by the lost-run check like any other."""
        rec = self._recs.get(turn_id)
        if rec is None or rec.state != TurnState.RUNNING:
            return
        if self.routable is not None and not self.routable(worker):
            return  # its peer hello has not reached us yet: the next heartbeat tries again
        log.warning("orphaned turn %s: %s does not run it; pushing it there again", turn_id, worker)
        try:
            self._send_run(worker, rec, resume=True)
        except GeodeError as exc:
            log.info("orphaned turn %s: %s unreachable (%s); retried at its next beat", turn_id, worker, exc)
            return
        del self._orphans[turn_id]
        self.pool.assign(worker, turn_id)  # the lost-run check counts from this push

    def _requeue_orphan(self, turn_id: str, why: str) -> None:
        log.warning("orphaned turn %s: %s; re-queueing it", turn_id, why)
        self._orphans.pop(turn_id, None)
        self._requeue(turn_id)

    def _requeue(self, turn_id: str) -> None:
        """Its worker was lost: back to the head of its lane in its first-submission place, or, after
        ``max_requeues`` such losses, ended ``worker_lost`` (it would only bounce between workers)."""
        self.desk.deny_where(turn_id=turn_id, reason="worker_died")
        with self.stream_lock:  # its held-back events go with it (the bus thread's relay shares the stream)
            self.reorder.forget(turn_id)
        self.pool.finish(turn_id)
        self._starting.pop(turn_id, None)
        rec = self._recs.get(turn_id)
        if turn_id in self._finishing:
            return  # its done record is being stored: it ended, nothing to run again
        if rec is None or rec.state == TurnState.DONE:
            self.queue.release(turn_id)
            return
        requeues = requeues_of(rec) + 1
        if turn_id in self._admitting:  # started at once and its first record is still being stored: it
            self.queue.requeue(turn_id)  # waits, held, at the head of its lane for that write's outcome
            self.queue.hold(turn_id)  # (service._first_stored); nothing durable to re-queue over yet
            rec.state, rec.worker, rec.incarnation = TurnState.QUEUED, None, None
            rec.resume, rec.requeues = True, requeues
            return
        if requeues > self.max_requeues:
            self._give_up(rec, requeues - 1)
            return
        self.queue.requeue(turn_id)
        rec.state, rec.worker, rec.incarnation = TurnState.QUEUED, None, None
        rec.resume, rec.requeues = True, requeues
        rec.updated_at = self._wall()
        # the in-memory queue holds it either way; if this write fails the next start re-derives it
        self._put(rec, lambda out: self._log_failed(f"re-queue of {turn_id}", out))
        self._emit(
            rec.session_id,
            turn_id,
            lanes_msg.TURN_QUEUED,
            {"position": 0, "resume": True, "requeues": requeues, "age_s": round(self._age(rec), 3)},
        )

    def _give_up(self, rec: TurnRecord, requeues: int) -> None:
        """End a turn whose workers kept dying under it: its done record first, then its lane is freed."""
        log.warning("turn %s lost its worker %d times; ending it worker_lost", rec.turn_id, requeues + 1)
        final = copy_record(rec)
        final.state, final.worker, final.incarnation = TurnState.DONE, None, None
        final.outcome = worker_lost_result(requeues + 1)
        final.requeues = requeues
        final.updated_at = self._wall()
        rec.state = TurnState.DONE  # no other path may start or re-queue it meanwhile
        self._finishing[rec.turn_id] = []

        def stored(out: Outcome) -> None:
            answers = self._finishing.pop(rec.turn_id, [])
            if isinstance(out, BaseException):  # not recorded: it stays queued; the next loss tries again
                log.warning("cannot record turn %s as worker_lost: %s", rec.turn_id, out)
                rec.state, rec.worker, rec.incarnation = TurnState.QUEUED, None, None
                self.queue.requeue(rec.turn_id, lost=False)
            elif rec.turn_id in self._recs:
                self._recs[rec.turn_id] = final
                self._finish(final)
            for answer in answers:
                answer(turns.Ack())
            self.schedule()

        self._put(final, stored)
