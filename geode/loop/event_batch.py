"""A turn's events sent several to a frame: held while the loop works without waiting, sent before it waits.

Per tool round the loop produces its events in two bursts (``tokens``, the pending batch's
``checkpoint_saved``, ``tool_start``; then ``tool_end``, the completed batch's ``checkpoint_saved``, the next
``round_start``), each followed by a wait: the tool, the model. :class:`EventBatch` holds a turn's events and
sends what it holds as one list when an event that comes just before a wait arrives (:data:`SEND_AFTER`: the
round's start before the model request, streamed text, retries and fallbacks, an approval request; a tool's
start unless the tool is quiet), when it holds ``TURN_EVENTS_MAX``, when the turn ends
(:meth:`EventBatch.close`), when the turn's thread has waited ``geode.loop.events.TOOL_HOLD_S`` (10 ms) for a
tool (:meth:`EventBatch.flush` through ``geode.loop.events.flush_held``), and in any case :data:`HOLD_S` after
the first held event (:class:`HoldTimer`, for the waits the loop does not announce: a slow store save, a hook,
a summary call). A quiet tool (:func:`quiet_tools`: read-only, and no approval can be asked for it, whose
request lanes would number before a held ``tool_start``) that answers within 10 ms has its ``tool_start`` and
``tool_end`` ride the next ``round_start``: one list a round, so one frame a round in the loop, lanes and
control, not two (issue 34 session 7); a slow one's start reaches the user within 10 ms. No event is later
than before by more than ``HOLD_S``, and those before the model request not at all.

The turn's last events (its ``termination`` and what came since the last send) are not sent on their own: the
loop worker takes them (:meth:`EventBatch.take`) into the turn's ``turn.done``, which lanes relays before it
ends the turn (lanes held the termination for its ``turn_done`` anyway: the user sees them no later).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable

from geode.protocol.turns import TURN_EVENTS_MAX, TurnEvent, TurnEventKind
from geode.tools.spec import ApprovalMode, EffectClass, ToolSpec

log = logging.getLogger(__name__)

HOLD_S = 0.05  # the longest an event is held (the timer's bound), only across a wait the loop does not say
# kinds the loop emits just before it waits (or that a person waits for): what is held goes out with them
SEND_AFTER = frozenset(
    {
        TurnEventKind.ROUND_START,  # the model request follows
        TurnEventKind.TEXT_DELTA,  # during the model call (already coalesced per 50 ms)
        TurnEventKind.LLM_RETRY,
        TurnEventKind.RETRY_WAIT,  # the backoff sleep follows
        TurnEventKind.FALLBACK,
        TurnEventKind.APPROVAL_REQUEST,
    }
)  # not TERMINATION: the turn ends, its last events ride its turn.done (EventBatch.take); not TOOL_START:
# a quiet tool's (EventBatch.quiet) is held: the turn's thread sends it if the tool runs over TOOL_HOLD_S
# (geode.loop.events.flush_held); another tool's goes out at once (an approval asked for it must not pass it)
Send = Callable[[list[TurnEvent]], None]
ASKS_ANYWAY = frozenset({"web_fetch"})  # read-only and no approval, yet asked for each new host


def quiet_tools(specs: Iterable[ToolSpec], hooked: Callable[[str], bool] | None = None) -> frozenset[str]:
    """The tools whose ``tool_start`` may be held (:attr:`EventBatch.quiet`): read-only, no approval, never
    asked for anyway (not ``web_fetch``, not an MCP tool: asked on its server's first use, none a PreToolUse
    hook could answer "ask" for: ``hooked``). Any other call may have lanes send an approval request for it
    while its ``tool_start`` is held, and the user would see the request first."""
    return frozenset(
        s.name
        for s in specs
        if s.policy.effect is EffectClass.READ
        and s.policy.approval is ApprovalMode.NONE
        and s.name not in ASKS_ANYWAY
        and not s.name.startswith("mcp__")
        and not (hooked is not None and hooked(s.name))
    )


class HoldTimer:
    """One thread per process that sends what a batch still holds ``hold_s`` after its first held event.

    A batch that sends on its own (the usual case) disarms without waking the thread; the thread is woken only
    when nothing earlier is due (so a steady flow of bursts costs at most one wake per ``hold_s``)."""

    def __init__(self, hold_s: float = HOLD_S) -> None:
        self.hold_s = hold_s
        self._cond = threading.Condition(threading.Lock())
        self._due: dict[EventBatch, float] = {}
        self._wake_at: float | None = None  # when the thread wakes next (None: it waits to be told)
        self._thread: threading.Thread | None = None

    def arm(self, batch: EventBatch) -> None:
        deadline = time.monotonic() + self.hold_s
        with self._cond:
            self._due.setdefault(batch, deadline)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="event-hold", daemon=True)
                self._thread.start()
            elif self._wake_at is None or deadline < self._wake_at:
                self._cond.notify()

    def disarm(self, batch: EventBatch) -> None:
        with self._cond:
            self._due.pop(batch, None)

    def _run(self) -> None:
        while True:
            with self._cond:
                now = time.monotonic()
                ready = [b for b, t in self._due.items() if t <= now]
                for b in ready:
                    del self._due[b]
                if not ready:
                    self._wake_at = min(self._due.values(), default=None)
                    self._cond.wait(None if self._wake_at is None else self._wake_at - now)
                    self._wake_at = now  # awake: an arm in between needs no notify
                    continue
            for b in ready:
                b.flush()


class EventBatch:
    """One turn's event sink (``geode.loop.ports.EventSink``): holds events and sends them as lists."""

    def __init__(self, send: Send, timer: HoldTimer | None = None, *, most: int = TURN_EVENTS_MAX) -> None:
        self._send = send
        self._timer = timer
        self._most = most
        self._held: list[TurnEvent] = []
        self._lock = threading.Lock()
        self.quiet: frozenset[str] = frozenset()  # tools whose tool_start is held (quiet_tools); others: sent

    def emit(self, event: TurnEvent) -> None:
        with self._lock:
            self._held.append(event)
            kind = event.kind
            if (
                kind in SEND_AFTER
                or len(self._held) >= self._most
                or (kind is TurnEventKind.TOOL_START and event.data.get("name") not in self.quiet)
            ):
                self._send_locked()
            elif len(self._held) == 1 and self._timer is not None:
                self._timer.arm(self)

    def flush(self) -> None:
        """Send what is held now (the timer; the turn's thread waiting for a tool; the turn's end)."""
        with self._lock:
            self._send_locked()

    def close(self) -> None:
        """The turn ended: send the rest (nothing is held past the turn's ``turn.done``)."""
        self.flush()

    def take(self) -> list[TurnEvent]:
        """The turn ended: what is held, handed to the caller (the ``turn.done`` carries it), not sent."""
        with self._lock:
            if self._timer is not None:
                self._timer.disarm(self)
            batch, self._held = self._held, []
            return batch

    def _send_locked(self) -> None:
        if self._timer is not None:
            self._timer.disarm(self)
        if not self._held:
            return
        batch, self._held = self._held, []
        try:
            self._send(batch)  # under the lock: batches leave in seq order
        except Exception as exc:  # an event is observation: losing some never fails the turn
            log.warning("%d turn event(s) dropped: %s", len(batch), exc)
