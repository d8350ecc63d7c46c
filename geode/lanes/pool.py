"""The loop-worker pool (reliable-worker pattern): READY, heartbeats, slots, death by silence or by report."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

HEARTBEAT_INTERVAL_S = 1.0
LIVENESS = 3  # missed heartbeats before a worker is presumed dead


def is_remote(name: str) -> bool:
    """``HOST/loop-1``: a loop worker on a worker host (``geode serve --role worker``)."""
    return "/" in name


def host_of(name: str) -> str | None:
    return name.split("/", 1)[0] if is_remote(name) else None


def once_per_worker(usable: Callable[[str], bool] | None) -> Callable[[str], bool] | None:
    """``usable`` asked at most once per worker name (one schedule's checks: the bus's peer list is sorted
    per question, and a schedule asks about every worker several times)."""
    if usable is None:
        return None
    seen: dict[str, bool] = {}

    def once(name: str) -> bool:
        ok = seen.get(name)
        if ok is None:
            ok = seen[name] = usable(name)
        return ok

    return once


@dataclass
class Worker:
    name: str
    incarnation: int
    capacity: int
    last_seen: float
    turns: set[str] = field(default_factory=set)
    assigned_at: dict[str, float] = field(default_factory=dict)
    address: str = ""  # a worker host's (``HOST/loop-1``), as it reported it

    @property
    def free(self) -> int:
        return max(0, self.capacity - len(self.turns))

    @property
    def key(self) -> str:
        return f"{self.name}#{self.incarnation}"


@dataclass(frozen=True)
class DeadWorker:
    name: str
    incarnation: int
    turns: tuple[str, ...]


class WorkerPool:
    """Which workers are alive, how many free slots each has, and which turns each runs (single-threaded)."""

    def __init__(
        self,
        *,
        heartbeat_interval_s: float = HEARTBEAT_INTERVAL_S,
        liveness: int = LIVENESS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.expiry_s = heartbeat_interval_s * liveness
        self._clock = clock
        self._workers: dict[str, Worker] = {}
        self._gone: dict[str, int] = {}  # name → highest incarnation known dead (never registered again)
        self._rr = 0

    def ready(self, name: str, incarnation: int, capacity: int = 1, address: str = "") -> DeadWorker | None:
        """A worker announced itself. A new incarnation of a known name means the old one died. A READY or
        heartbeat of an incarnation known to be dead (it arrived after its death was reported) is ignored."""
        if incarnation <= self._gone.get(name, -1):
            return None
        old = self._workers.get(name)
        if old is not None and old.incarnation == incarnation:
            old.last_seen, old.capacity = self._clock(), capacity
            old.address = address or old.address
            return None
        if old is not None and old.incarnation > incarnation:
            return None  # a late READY from an older incarnation
        self._workers[name] = Worker(name, incarnation, capacity, self._clock(), address=address)
        if old is None:
            return None
        self._gone[name] = max(self._gone.get(name, -1), old.incarnation)
        return DeadWorker(old.name, old.incarnation, tuple(sorted(old.turns)))

    def is_dead(self, name: str, incarnation: int) -> bool:
        """Is this incarnation known to be dead (a late message from it must not re-register it)?"""
        return incarnation <= self._gone.get(name, -1)

    def heartbeat(self, name: str, incarnation: int) -> bool:
        """Refresh liveness; False when the worker is unknown (it must send READY again)."""
        w = self._workers.get(name)
        if w is None or w.incarnation != incarnation:
            return False
        w.last_seen = self._clock()
        return True

    def pick(self, usable: Callable[[str], bool] | None = None, prefer: str | None = None) -> Worker | None:
        """A live worker with a free slot that ``usable`` accepts (``prefer`` when it is one, else round
        robin), or None."""
        candidates = sorted(
            (w for w in self._workers.values() if w.free > 0 and (usable is None or usable(w.name))),
            key=lambda w: w.name,
        )
        if not candidates:
            return None
        for w in candidates:
            if w.name == prefer:
                return w
        self._rr = (self._rr + 1) % len(candidates)
        return candidates[self._rr]

    def free_slots(self, usable: Callable[[str], bool] | None = None) -> int:
        return sum(w.free for w in self._workers.values() if usable is None or usable(w.name))

    def capacity(self) -> int:
        """The turns the registered workers can run at once (their declared capacities)."""
        return sum(w.capacity for w in self._workers.values())

    def assign(self, name: str, turn_id: str) -> None:
        self._workers[name].turns.add(turn_id)
        self._workers[name].assigned_at[turn_id] = self._clock()

    def unconfirmed(self, name: str, reported: Iterable[str], grace_s: float) -> list[str]:
        """Turns assigned to ``name`` over ``grace_s`` ago that its heartbeat omits: their run was lost."""
        w = self._workers.get(name)
        if w is None:
            return []
        now, seen = self._clock(), set(reported)
        return sorted(t for t in w.turns if t not in seen and now - w.assigned_at.get(t, now) > grace_s)

    def finish(self, turn_id: str) -> None:
        for w in self._workers.values():
            w.turns.discard(turn_id)
            w.assigned_at.pop(turn_id, None)

    def owner_of(self, turn_id: str) -> Worker | None:
        return next((w for w in self._workers.values() if turn_id in w.turns), None)

    def owner_key(self, turn_id: str) -> str | None:
        """``owner_of(turn_id).key``, safe from another thread (the stream relay on the bus thread): it reads
        a copy of the workers taken in one step, never a dict the owner may be resizing."""
        for w in list(self._workers.values()):
            if turn_id in w.turns:
                return w.key
        return None

    def is_alive(self, name: str, incarnation: int | None) -> bool:
        w = self._workers.get(name)
        return w is not None and (incarnation is None or w.incarnation == incarnation)

    def died(self, name: str, incarnation: int | None = None, *, known: bool = True) -> DeadWorker | None:
        """The supervisor (or silence) says this worker is gone: forget it and hand back its turns.

        ``known``: its death is certain (reported by the supervisor), so that incarnation is never
        registered again by a late READY or heartbeat; a worker presumed dead by silence may come back."""
        if known and incarnation is not None:
            self._gone[name] = max(self._gone.get(name, -1), incarnation)
        w = self._workers.get(name)
        if w is None or (incarnation is not None and w.incarnation != incarnation):
            return None
        if known:
            self._gone[name] = max(self._gone.get(name, -1), w.incarnation)
        del self._workers[name]
        return DeadWorker(w.name, w.incarnation, tuple(sorted(w.turns)))

    def reap(self) -> list[DeadWorker]:
        """Workers silent for longer than the expiry are dead. A local worker may come back (its supervisor
        would have said if it died); a remote one (``HOST/loop-1``) is dead for good: a late heartbeat of
        it after a cut link is refused and it restarts as a new incarnation, never resuming the same one."""
        now = self._clock()
        stale = [w for w in self._workers.values() if now - w.last_seen > self.expiry_s]
        dead = (self.died(w.name, w.incarnation, known=is_remote(w.name)) for w in stale)
        return [d for d in dead if d is not None]

    def snapshot(self) -> list[dict[str, object]]:
        now = self._clock()
        return [
            {
                "worker": w.name,
                "incarnation": w.incarnation,
                "capacity": w.capacity,
                "running": sorted(w.turns),
                "last_seen_s": round(now - w.last_seen, 3),
                **({"address": w.address} if w.address else {}),
            }
            for w in sorted(self._workers.values(), key=lambda w: w.name)
        ]
