"""Requests from a turn's origin side (control, messengers, the executor): cancel, approvals, replay and
the turn record query. Each answers through ``Asked.answer``, after its store round trip if it needs one.
"""

from __future__ import annotations

from typing import Any

from geode.lanes.records import Outcome
from geode.lanes.state import RECENT_OUTCOMES, Asked, LanesState, copy_record, outcome_row
from geode.protocol import lanes as lanes_msg
from geode.protocol import turns
from geode.records.models import TurnRecord, TurnState

INTERACTIVE = ("IPC", "REPL")
CHAT_ORIGINS = ("messengers",)  # DAEMON turns of a bound chat: the messengers child asks its approvers


def cancelled_result(reason: str = "user") -> dict[str, Any]:
    return turns.TurnResult(
        termination_reason=turns.TerminationReason.USER_CANCELLED,
        error=f"cancelled before it started ({reason}); completed side effects remain in place",
    ).model_dump(mode="json")


class OriginRequests(LanesState):
    """The origin-side requests of the lanes state machine."""

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
            final = copy_record(rec)
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
        chat = rec is not None and rec.mode == "DAEMON" and rec.origin in CHAT_ORIGINS
        if rec is None or not rec.origin or (rec.mode not in INTERACTIVE and not chat):
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
            ask=ask.model_dump(mode="json"),
        )
        if not opened:
            r.answer(
                lanes_msg.ApprovalDecision(
                    approval_id=ask.approval_id, decision="n", reason="duplicate_or_full"
                )
            )
            return
        self._emit(ask.session_id, ask.turn_id, lanes_msg.APPROVAL_REQUEST, ask.model_dump(mode="json"))

    def peer_seen(self, name: str) -> int:
        """A peer (re)appeared (its first hello): ask it again what still waits on it. A request cast while
        its route was unknown (lanes or the origin had just restarted) was dropped; the origin answers each
        id once (a person, or ``no_origin`` when nobody is attached to the session)."""
        waiting = self.desk.pending_for(name)
        for p in waiting:
            self._emit(p.session_id, p.turn_id, lanes_msg.APPROVAL_REQUEST, p.ask)
        return len(waiting)

    def approval_reply(self, b: lanes_msg.ApprovalReply, r: Asked) -> None:
        peer = r.sender.split("#", 1)[0]  # only the turn's origin peer may answer (its name, sans "#inc")
        ok = self.desk.answer(b.approval_id, b.decision, b.reason, origin=peer, note=b.note)
        r.answer(lanes_msg.Ok(ok=ok))

    def replay(self, q: lanes_msg.Replay, r: Asked) -> None:
        with self.stream_lock:  # the bus thread's relay appends to it meanwhile
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
            older = [outcome_row(t) for t in done[-RECENT_OUTCOMES:] if t.turn_id not in seen]
            r.answer(
                lanes_msg.Replayed(
                    events=events, complete=complete, outcomes=older + outcomes, running=running
                )
            )

        # this session's done turns only: every done turn of the store is megabytes after a few thousand turns
        self._io(
            q.session_id,
            lambda: self.records.list_turns(state=TurnState.DONE.value, session_id=q.session_id),
            with_done,
        )

    def turn(self, q: lanes_msg.TurnQuery, r: Asked) -> None:
        rec = self._recs.get(q.turn_id)
        # admitting or finishing: the in-memory record is ahead of the store (a done state whose outcome is
        # still being written); answer what the store holds
        if rec is not None and q.turn_id not in self._admitting and q.turn_id not in self._finishing:
            r.answer(rec.model_dump(mode="json"))
            return

        def found(out: Outcome) -> None:
            r.answer(out if isinstance(out, BaseException) else (out.model_dump(mode="json") if out else {}))

        self._io(q.turn_id, lambda: self.records.get_turn(q.turn_id), found)
