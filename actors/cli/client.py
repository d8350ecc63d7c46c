"""The thin CLI's control client: a prompt sent as a turn and its events streamed until ``turn_done``.

Over :class:`actors.cli.control_socket.ControlSocket`. While a turn runs, the client notices a restarted
control child (its socket reports the disconnection at once; else a ping answered ``ok: false`` or silence),
handshakes again with the same session and re-attaches from the last sequence number it saw, so the rest of
the turn still arrives. When lanes restarts, control pushes ``cli.notice`` and the client replays from its
last seq at once (the old lanes may have taken events with it).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from actors.cli import wire_data as c
from actors.cli import wire_data as lanes_msg
from actors.cli.control_socket import PING_EVERY_S, ControlSocket, EventFn
from actors.cli.interrupt_latch import LATCH
from actors.cli.turn_replies import cancel_pending, unknown_to
from geode.protocol.errors import GeodeError, RequestTimeout

SILENCE_S = 2.0  # no answer to pings for this long: assume the control child restarted
CATCHUP_S = 0.5  # no stream event for this long while a turn runs: replay from the last seq (a cheap probe)
MAX_PINGS_IN_FLIGHT = 64
UNACKED_CANCEL_WAIT_S = 10.0  # Ctrl-C before the prompt was acknowledged: follow the cancelled turn this long

ApprovalFn = Callable[[dict[str, Any]], str]  # "y" / "a" / "n" / "n: why", or NO_ONE; Ctrl-C cancels the turn
NO_ONE = "no_one"  # an approval callback's answer when it has nobody to ask (sent as reason "no_terminal")


class ControlClient(ControlSocket):
    """A control-socket client that runs and follows turns (the CLI's, the chaos driver's, the benches')."""

    def run_prompt(
        self,
        text: str,
        *,
        on_event: EventFn | None = None,
        on_approval: ApprovalFn | None = None,
        timeout_s: float = 3600.0,
        on_interrupt: Callable[[], bool] | None = None,
        cancel_wait_s: float | None = None,
        compact: bool = False,
    ) -> dict[str, Any]:
        """Send a prompt and stream its events until ``turn_done``; returns the result (+ ``turn_id``).
        ``compact``: the chat's ``/compact`` (the turn only compacts the session).

        The client chooses the turn id, so a prompt whose reply was lost is re-sent as the same turn
        (``reattach.submit_prompt``). Giving up (no acknowledgement, or ``timeout_s`` passed while the turn
        runs) raises ``reattach.TurnContinues`` with the turn's id."""
        from actors.cli.reattach import TurnContinues, new_turn_id, submit_prompt

        backlog: list[dict[str, Any]] = []
        mine = new_turn_id()
        body = {
            "text": text,
            "session_id": self.session_id,
            "turn_id": mine,
            **({"compact": True} if compact else {}),
        }
        try:
            accepted = submit_prompt(self, body, backlog)
        except KeyboardInterrupt:  # Ctrl-C before the prompt's reply came: the turn may run already
            if on_interrupt is None or not on_interrupt():
                raise
            return self._cancel_unacknowledged(mine, backlog, on_event, on_approval, cancel_wait_s)
        turn_id = accepted["turn_id"]
        try:
            return self.follow(
                turn_id,
                backlog=backlog,
                on_event=on_event,
                on_approval=on_approval,
                timeout_s=timeout_s,
                on_interrupt=on_interrupt,
                cancel_wait_s=cancel_wait_s,
            )
        except RequestTimeout as exc:
            sid = str(accepted.get("session_id") or self.session_id or "")
            raise TurnContinues(turn_id, sid, exc.message, accepted=True) from exc

    def _cancel_unacknowledged(
        self,
        turn_id: str,
        backlog: list[dict[str, Any]],
        on_event: EventFn | None,
        on_approval: ApprovalFn | None,
        cancel_wait_s: float | None,
    ) -> dict[str, Any]:
        """Cancel our turn by its id, then follow it to its end for a while: a turn that ran reports what
        the cancel stopped (not applied), one that never started gives ``cancel_pending``."""
        try:
            self.cancel(turn_id)
        except GeodeError:
            pass
        wait = UNACKED_CANCEL_WAIT_S if cancel_wait_s is None else cancel_wait_s
        try:
            return self.follow(
                turn_id, backlog=backlog, on_event=on_event, on_approval=on_approval, timeout_s=wait
            )
        except RequestTimeout:
            return cancel_pending(turn_id)

    def follow(
        self,
        turn_id: str,
        *,
        backlog: list[dict[str, Any]] | None = None,
        on_event: EventFn | None = None,
        on_approval: ApprovalFn | None = None,
        timeout_s: float = 3600.0,
        on_interrupt: Callable[[], bool] | None = None,
        cancel_wait_s: float | None = None,
    ) -> dict[str, Any]:
        """Stream the turn's events until its ``turn_done``. Ctrl-C (when ``on_interrupt()`` says so) sends
        ``cli.cancel``; then the turn is followed to its end, or, with ``cancel_wait_s``, at most that long
        (a second Ctrl-C: not at all) before returning ``user_cancelled`` with ``cancel_pending``. Ctrl-C is
        latched while the turn is followed (actors/cli/interrupt_latch.py) and taken at the loop's top, so
        one that lands anywhere in the loop cancels the turn the same way."""
        with LATCH.installed():
            args = (backlog, on_event, on_approval, timeout_s, on_interrupt, cancel_wait_s)
            return self._follow(turn_id, *args)

    def _follow(
        self,
        turn_id: str,
        backlog: list[dict[str, Any]] | None,
        on_event: EventFn | None,
        on_approval: ApprovalFn | None,
        timeout_s: float,
        on_interrupt: Callable[[], bool] | None,
        cancel_wait_s: float | None,
    ) -> dict[str, Any]:
        deadline = time.monotonic() + timeout_s
        give_up_at: float | None = None  # after a Ctrl-C: stop waiting for the cancelled turn's end here
        last_heard = last_event = time.monotonic()
        next_ping = last_reattach = 0.0
        drops, notices = self.disconnects, self.notices
        pings: dict[str, float] = {}  # our pings in flight → when sent (replies may come late, in a burst)
        pending = list(backlog or [])

        def interrupted() -> bool:
            """Ctrl-C: cancel the turn and keep following it (for a while) to its end; True: stop now."""
            nonlocal give_up_at
            if on_interrupt is None or not on_interrupt():
                raise KeyboardInterrupt
            if give_up_at is not None:  # the second Ctrl-C: stop waiting now
                return True
            try:
                self.cancel(turn_id)  # lanes denies the turn's pending approvals ("cancelled") and stops it
            except GeodeError:
                pass
            if cancel_wait_s is not None:
                give_up_at = time.monotonic() + cancel_wait_s
            return False

        while time.monotonic() < deadline:
            if LATCH.take() and interrupted():  # a Ctrl-C latched since the last pass
                return cancel_pending(turn_id)
            pending, self.inbox = [*pending, *self.inbox], []
            while pending:
                ev = pending.pop(0)
                try:
                    out = self._on_turn_event(ev, turn_id, on_event, on_approval)
                except KeyboardInterrupt:  # Ctrl-C at the approval prompt: the turn is cancelled, not denied
                    if interrupted():
                        return cancel_pending(turn_id)
                    continue
                if out is not None:
                    return out
            if give_up_at is not None and time.monotonic() >= give_up_at:
                return cancel_pending(turn_id)
            try:
                wait = 0.2 if give_up_at is None else min(0.05, max(0.0, give_up_at - time.monotonic()))
                env = self._recv(wait)
            except KeyboardInterrupt:
                if interrupted():
                    return cancel_pending(turn_id)
                continue
            now = time.monotonic()
            if env is not None:
                last_heard = now
                if env.type == c.CLI_EVENT:
                    last_event = now
                    if self._note(env.body):
                        pending.append(env.body)
                elif env.type == c.CLI_NOTICE:
                    self.notices += 1
                elif self.late_attach(env):  # a timed-out catch-up's reply, come late: its outcomes now
                    try:
                        pending.extend(self.catch_up(timeout_s=2.0))  # takes it: nothing is sent
                    except GeodeError:
                        pass
                elif env.corr in pings and pings.pop(env.corr) >= last_reattach and unknown_to(env):
                    # a control that does not know this connection (it restarted): any of our pings sent
                    # since the last re-attach says so, not only the latest (a slow control answers late)
                    last_reattach = now
                    try:
                        pending.extend(self.reattach(timeout_s=2.0))
                    except GeodeError:
                        pass  # the next ping tries again
            if self.disconnects != drops:  # control went away: handshake again now (sent as it comes back)
                drops = self.disconnects
                last_reattach = last_heard = last_event = now
                try:
                    pending.extend(self.reattach(timeout_s=2.0))
                except GeodeError:
                    pass  # not back within 2 s: pings and silence take over
                continue
            if self.notices != notices:  # lanes restarted: what died with it is replayed now
                notices = self.notices
                last_event = now
                try:
                    pending.extend(self.catch_up(timeout_s=2.0))
                except GeodeError:
                    pass
                continue
            if env is not None:
                continue
            if now - last_event > CATCHUP_S:  # a quiet stream: ask for anything we may have missed
                last_event = now  # not backed off: under repeated kills a probe that found nothing yet
                try:  # is followed by the one that finds the turn's end (a 600 s chaos run said so)
                    pending.extend(self.catch_up(timeout_s=2.0))
                    last_heard = time.monotonic()  # control answered it (it may have been slow): not silent
                except GeodeError:
                    pass
            if now - last_heard > SILENCE_S:
                last_heard = now
                try:
                    pending.extend(self.reattach(timeout_s=2.0))
                except GeodeError:
                    continue  # still down; keep trying until the deadline
            if now >= next_ping:
                next_ping = now + PING_EVERY_S
                pings[self.send_request(c.PING, {})] = now
                while len(pings) > MAX_PINGS_IN_FLIGHT:
                    pings.pop(next(iter(pings)))
        raise RequestTimeout(f"turn {turn_id} did not finish within {timeout_s:g}s")

    def _on_turn_event(
        self, ev: dict[str, Any], turn_id: str, on_event: EventFn | None, on_approval: ApprovalFn | None
    ) -> dict[str, Any] | None:
        if on_event is not None:
            on_event(ev)
        if ev.get("kind") == lanes_msg.APPROVAL_REQUEST:
            data = ev.get("data") or {}
            with LATCH.raising():  # a person is asked: Ctrl-C there cancels the turn at once
                answer = on_approval(data) if on_approval is not None else NO_ONE
            decision, _, note = answer.partition(":")  # "n: <reason>" carries the reason to the model
            reply = {"approval_id": data.get("approval_id", ""), "decision": decision.strip() or "n"}
            if answer == NO_ONE:  # nobody was asked: said as such, never as a person's "n"
                reply = {**reply, "decision": "n", "reason": "no_terminal"}
            else:
                reply["note"] = note.strip()[:1024]
            try:
                self.request(c.APPROVAL_RESPONSE, reply, timeout_s=5.0)
            except GeodeError:
                pass  # an unknown or stale approval: the daemon already decided
        if ev.get("kind") == lanes_msg.TURN_DONE and ev.get("turn_id") == turn_id:
            return {**(ev.get("data") or {}).get("result", {}), "turn_id": turn_id}
        return None
