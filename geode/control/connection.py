"""One control-socket connection: handshake state, attached streams, pending approvals, bounded jobs."""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from geode.control.session_index import SessionIndex
from geode.control.settings import QUEUE_MAX
from geode.protocol.errors import Overloaded
from geode.protocol.lanes import StreamEvent
from geode.sessions.factory import SessionSpec

MAX_ATTACHED = 16

Job = Callable[[], object]  # returns PENDING when it ends later (it calls ``Connection.resume`` then)
Runner = Callable[[Job], object]  # runs a job off the socket reader (a thread pool in the shell)
PENDING = object()  # a job's answer is in flight: the connection's next job waits for ``resume``


class ConnState(StrEnum):
    NEW = "new"  # connected, no handshake yet: only handshake / ping / exit are accepted
    READY = "ready"
    CLOSED = "closed"


@dataclass
class Connection:
    conn_id: str
    state: ConnState = ConnState.NEW
    features: tuple[str, ...] = ()
    spec: SessionSpec | None = None
    is_tty: bool = False
    skip_permissions: bool = False
    last_seen: float = field(default_factory=time.monotonic)
    created: float = field(default_factory=time.monotonic)  # the handshake deadline counts from here
    handshake_sent: bool = False  # a handshake is queued or running: not evicted as a silent slot
    attached: dict[str, int] = field(default_factory=dict)  # session id -> last seq delivered
    replaying: dict[str, list[StreamEvent]] = field(default_factory=dict)
    pending_approvals: dict[str, str] = field(default_factory=dict)  # approval id -> session id
    prompted: set[str] = field(default_factory=set)  # sessions this connection ran turns in (SessionEnd)
    resumed: set[str] = field(default_factory=set)  # resumed, no turn yet (next turn: SessionStart resume)
    lock: threading.RLock = field(default_factory=threading.RLock)
    # the slot table's index of connections by attached session, kept by every change of ``attached``
    index: SessionIndex[Connection] | None = field(default=None, repr=False, compare=False)
    _jobs: deque[Job] = field(default_factory=deque)
    _busy: bool = False
    # (spec, session id, its turn settings): the frozen spec's dump, made once per spec and session
    _settings: tuple[SessionSpec, str, dict[str, Any]] | None = field(default=None, repr=False, compare=False)

    @property
    def session_id(self) -> str | None:
        return self.spec.session_id if self.spec else None

    def turn_settings(self, session_id: str) -> dict[str, Any]:
        """``spec.turn_settings(session_id)`` (a prompt's ``turn.run`` settings), dumped once while the spec
        (frozen; a new one replaces it) and the session stay the same. Each call gets a fresh dict, its lists
        and maps copied, so a caller that adds a key (``session_source``) changes no later prompt's (issue 34:
        the pydantic dump was ~13 us a prompt)."""
        spec = self.spec
        assert spec is not None
        held = self._settings
        if held is None or held[0] is not spec or held[1] != session_id:
            held = self._settings = (spec, session_id, spec.turn_settings(session_id))
        return {
            k: list(v) if type(v) is list else dict(v) if type(v) is dict else v for k, v in held[2].items()
        }

    def enqueue(self, job: Job, runner: Runner, *, limit: int = QUEUE_MAX, here: bool = False) -> None:
        """Run ``job`` after this connection's earlier jobs (strict order); ``Overloaded`` when full.
        ``here``: a job that never blocks (it sends and ends later: ``PENDING``) runs on this thread when
        nothing of the connection is queued or running (no pool thread woken for it)."""
        with self.lock:
            if len(self._jobs) >= limit:
                raise Overloaded(f"connection has {len(self._jobs)} requests waiting")
            self._jobs.append(job)
            if self._busy:
                return
            self._busy = True
            if here:
                job = self._jobs.popleft()
        if not here:
            runner(self._drain)
        elif job() is not PENDING:
            self.resume(runner)

    def resume(self, runner: Runner) -> None:
        """A job that answered ``PENDING`` ended: the connection's next job runs (on ``runner``), if any."""
        with self.lock:
            if not self._jobs or self.state is ConnState.CLOSED:
                self._jobs.clear()
                self._busy = False
                return
        runner(self._drain)

    def _drain(self) -> None:
        while True:
            with self.lock:
                if not self._jobs or self.state is ConnState.CLOSED:
                    self._jobs.clear()
                    self._busy = False
                    return
                job = self._jobs.popleft()
            if job() is PENDING:  # ends later: its resume() runs the next job
                return

    def waiting(self) -> int:
        with self.lock:
            return len(self._jobs)

    def attach(self, session_id: str, after_seq: int, *, replaying: bool = False) -> None:
        with self.lock:
            if session_id not in self.attached:
                if len(self.attached) >= MAX_ATTACHED:
                    oldest = next(iter(self.attached))
                    self.attached.pop(oldest)
                    if self.index is not None:
                        self.index.discard(oldest, self)
                if self.index is not None:
                    self.index.add(session_id, self)
            self.attached[session_id] = max(after_seq, self.attached.get(session_id, 0))
            if replaying:
                self.replaying[session_id] = []

    def accept(self, ev: StreamEvent) -> list[StreamEvent]:
        """Events to deliver now for a live event (held back while that session replays; seq-deduped)."""
        with self.lock:
            if ev.session_id not in self.attached:
                return []
            held = self.replaying.get(ev.session_id)
            if held is not None:
                held.append(ev)
                return []
            return self._take([ev])

    def finish_replay(self, session_id: str, events: list[StreamEvent]) -> list[StreamEvent]:
        """Replayed events followed by the live ones that arrived meanwhile, in seq order, no repeats."""
        with self.lock:
            held = self.replaying.pop(session_id, [])
            merged = sorted({e.seq: e for e in [*events, *held]}.values(), key=lambda e: e.seq)
            return self._take(merged)

    def _take(self, events: list[StreamEvent]) -> list[StreamEvent]:
        out = []
        for ev in events:
            last = self.attached.get(ev.session_id)
            if last is None:  # a replay that outlived its session's attachment takes it again
                last = 0
                if self.index is not None:
                    self.index.add(ev.session_id, self)
            if ev.seq > last:
                self.attached[ev.session_id] = ev.seq
                out.append(ev)
        return out
