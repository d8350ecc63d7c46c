"""LaneQueue: one running turn per session (bounded FIFO behind it) and a global cap on running turns.

Pure and single-threaded by contract (only the lanes actor's thread touches it). One instance serves
every entry path (CLI, messengers, MCP), so the global cap is system-wide. The queue only decides *which*
turn may start; who runs it is the worker pool's business.
"""

from __future__ import annotations

import time
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass, field

from geode.lanes.settings import DEFAULT_SESSION_QUEUE
from geode.protocol.errors import Conflict, NotFound, Overloaded

DEFAULT_GLOBAL_CAP = 4  # a LaneQueue built without one (tests); the daemon follows the workers' capacity
DEFAULT_MAX_QUEUED = 1024


@dataclass
class _Entry:
    turn_id: str
    session_id: str
    enqueued_at: float  # when it (last) joined the queue: lane wait statistics
    started_at: float | None = None
    held: bool = False  # admitted but its durable record is not stored yet: it blocks its lane, never starts
    first_at: float = 0.0  # its first submission: its place in the global order and its age
    requeues: int = 0  # times it went back to the queue because its worker was lost


@dataclass
class _Lane:
    queue: deque[str] = field(default_factory=deque)
    running: str | None = None
    held_since: float | None = None
    waits: deque[float] = field(default_factory=lambda: deque(maxlen=64))


@dataclass(frozen=True)
class Grant:
    turn_id: str
    session_id: str
    waited_s: float
    age_s: float = 0.0  # since its first submission (across re-queues)
    requeues: int = 0


class LaneQueue:
    """Session lanes plus a global lane. Not thread-safe: its owner (the lanes actor) is its one thread."""

    def __init__(
        self,
        *,
        global_cap: int = DEFAULT_GLOBAL_CAP,
        session_queue_max: int = DEFAULT_SESSION_QUEUE,
        max_queued: int = DEFAULT_MAX_QUEUED,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if global_cap < 1 or session_queue_max < 1:
            raise ValueError("global_cap and session_queue_max must be >= 1")
        self.global_cap = global_cap
        self.session_queue_max = session_queue_max
        self.max_queued = max_queued
        self._clock = clock
        self._entries: dict[str, _Entry] = {}
        self._lanes: dict[str, _Lane] = {}
        self._order: OrderedDict[str, None] = OrderedDict()  # queued turn ids in arrival order
        self._running: set[str] = set()
        self._global_waits: deque[float] = deque(maxlen=256)

    # --- admission -------------------------------------------------------------------------------
    def enqueue(
        self,
        turn_id: str,
        session_id: str,
        *,
        front: bool = False,
        held: bool = False,
        first_at: float | None = None,
        requeues: int = 0,
    ) -> int:
        """Queue a turn behind its session lane; returns its position (0 = next). Idempotent by turn id.

        ``front`` puts it at the head of its session lane and of the global order (resumes go first);
        with ``first_at`` (its first submission, this queue's clock: a reloaded turn) it goes at the head of
        its lane and takes its place in the global order by first submission instead.
        Raises ``Overloaded`` when the session's FIFO (or the whole queue) is full. A ``held`` turn is not
        granted until :meth:`unhold` (its record is being stored).
        """
        existing = self._entries.get(turn_id)
        if existing is not None:
            if existing.session_id != session_id:
                raise Conflict(f"turn {turn_id} already queued for another session")
            lane = self._lanes[session_id]
            return 0 if lane.running == turn_id else lane.queue.index(turn_id)
        lane = self._lanes.setdefault(session_id, _Lane())
        full = len(lane.queue) >= self.session_queue_max or len(self._order) >= self.max_queued
        if not front and full:
            raise Overloaded(f"session {session_id} already has {len(lane.queue)} queued turns")
        now = self._clock()
        first = now if first_at is None else min(first_at, now)
        entry = _Entry(turn_id, session_id, now, held=held, first_at=first, requeues=requeues)
        self._entries[turn_id] = entry
        if front:
            lane.queue.appendleft(turn_id)
            if first_at is None:
                self._order[turn_id] = None
                self._order.move_to_end(turn_id, last=False)
            else:
                self._place_by_age(entry)
            return 0
        lane.queue.append(turn_id)
        self._order[turn_id] = None
        return len(lane.queue) - 1 + (1 if lane.running else 0)

    def _place_by_age(self, entry: _Entry) -> None:
        """Insert into the global order before the first queued turn first submitted after it."""
        ids = [t for t in self._order if t != entry.turn_id]
        at = next((i for i, t in enumerate(ids) if self._entries[t].first_at > entry.first_at), len(ids))
        ids.insert(at, entry.turn_id)
        self._order = OrderedDict.fromkeys(ids)

    def grant(self, limit: int | None = None) -> list[Grant]:
        """Start as many queued turns as lanes allow (at most ``limit``): FIFO across sessions.

        A granted turn holds its session lane and a global slot until :meth:`release`.
        """
        out: list[Grant] = []
        now = self._clock()
        for turn_id in list(self._order):
            if len(self._running) >= self.global_cap or (limit is not None and len(out) >= limit):
                break
            entry = self._entries[turn_id]
            lane = self._lanes[entry.session_id]
            if lane.running is not None or lane.queue[0] != turn_id or entry.held:
                continue
            lane.queue.popleft()
            del self._order[turn_id]
            lane.running = turn_id
            lane.held_since = now
            entry.started_at = now
            self._running.add(turn_id)
            waited = now - entry.enqueued_at
            lane.waits.append(waited)
            self._global_waits.append(waited)
            out.append(Grant(turn_id, entry.session_id, waited, now - entry.first_at, entry.requeues))
        return out

    def hold(self, turn_id: str) -> bool:
        """Keep a queued turn from being granted (its first durable record is being stored). False if it is
        not queued (running, or gone)."""
        entry = self._entries.get(turn_id)
        if entry is None or turn_id in self._running:
            return False
        entry.held = True
        return True

    def unhold(self, turn_id: str) -> bool:
        """The held turn's record is stored: it may be granted now. False if it is no longer queued."""
        entry = self._entries.get(turn_id)
        if entry is None or turn_id in self._running:
            return False
        entry.held = False
        return True

    def adopt_running(
        self, turn_id: str, session_id: str, *, first_at: float | None = None, requeues: int = 0
    ) -> None:
        """Mark a turn as already running (reloaded at start-up on a live worker); bypasses the cap check."""
        if turn_id in self._running:
            return
        self.remove(turn_id, missing_ok=True)
        lane = self._lanes.setdefault(session_id, _Lane())
        if lane.running is not None and lane.running != turn_id:
            raise Conflict(f"session {session_id} already runs {lane.running}")
        now = self._clock()
        first = now if first_at is None else min(first_at, now)
        self._entries[turn_id] = _Entry(turn_id, session_id, now, now, first_at=first, requeues=requeues)
        lane.running, lane.held_since = turn_id, now
        self._running.add(turn_id)

    # --- release -----------------------------------------------------------------------------------
    def release(self, turn_id: str) -> bool:
        """Free the session lane and global slot of a running turn. False if it was not running."""
        if turn_id not in self._running:
            return False
        entry = self._entries.pop(turn_id)
        self._running.discard(turn_id)
        lane = self._lanes[entry.session_id]
        if lane.running == turn_id:
            lane.running, lane.held_since = None, None
        self._gc(entry.session_id)
        return True

    def requeue(self, turn_id: str, *, lost: bool = True) -> bool:
        """A running turn goes back to the head of its lane, keeping its place in the global order (its
        first submission); ``lost``: its worker was lost (counted in its ``requeues``)."""
        if turn_id not in self._running:
            return False
        old = self._entries[turn_id]
        self.release(turn_id)
        self.enqueue(
            turn_id, old.session_id, front=True, first_at=old.first_at, requeues=old.requeues + int(lost)
        )
        return True

    def remove(self, turn_id: str, *, missing_ok: bool = False) -> str:
        """Drop a queued (not running) turn, e.g. cancelled before it started. Returns its session id."""
        entry = self._entries.get(turn_id)
        if entry is None or turn_id in self._running:
            if missing_ok:
                return entry.session_id if entry else ""
            raise NotFound(f"turn {turn_id} is not queued")
        del self._entries[turn_id]
        self._order.pop(turn_id, None)
        lane = self._lanes[entry.session_id]
        lane.queue.remove(turn_id)
        self._gc(entry.session_id)
        return entry.session_id

    def _gc(self, session_id: str) -> None:
        lane = self._lanes.get(session_id)
        if lane is not None and lane.running is None and not lane.queue:
            del self._lanes[session_id]  # bounded: no per-session state outlives its work

    # --- observation ---------------------------------------------------------------------------------
    def state_of(self, turn_id: str) -> str | None:
        if turn_id in self._running:
            return "running"
        return "queued" if turn_id in self._entries else None

    def running(self) -> list[str]:
        return sorted(self._running)

    def queued(self) -> list[str]:
        return list(self._order)

    def age_of(self, turn_id: str) -> tuple[float, int] | None:
        """(seconds since its first submission, re-queues) of a queued or running turn."""
        entry = self._entries.get(turn_id)
        return None if entry is None else (self._clock() - entry.first_at, entry.requeues)

    def running_for(self, session_id: str) -> str | None:
        lane = self._lanes.get(session_id)
        return lane.running if lane else None

    def stats(self) -> dict[str, object]:
        """Lane wait times, queue lengths and held lanes, for ``geode status``. A session's figures are rows
        naming it (``session_id``), never a map keyed by it: msgpack interns every map key it unpacks and
        CPython 3.12's interned strings are immortal, so each session id a status reply held stayed for good
        in whoever read it (control, on every ``geode status``)."""
        now = self._clock()
        waits = sorted(self._global_waits)
        held = [
            {
                "session_id": s,
                "turn_id": ln.running,
                "held_s": round(now - (ln.held_since or now), 3),
                "queued": len(ln.queue),
            }
            for s, ln in self._lanes.items()
            if ln.running is not None
        ]
        return {
            "global_cap": self.global_cap,
            "running": len(self._running),
            "queued": len(self._order),
            "queue_lengths": [
                {"session_id": s, "queued": len(ln.queue)} for s, ln in self._lanes.items() if ln.queue
            ],
            "held_lanes": held,
            "wait_p50_s": round(waits[len(waits) // 2], 4) if waits else 0.0,
            "wait_max_s": round(waits[-1], 4) if waits else 0.0,
            "oldest_queued_s": round(
                max((now - self._entries[t].first_at for t in self._order), default=0.0), 3
            ),
        }
