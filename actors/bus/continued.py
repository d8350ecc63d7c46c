"""A request completed by a callback (a continuation) instead of a thread waiting for its reply.

``ContinuedCalls.call`` sends a request on the calling thread and returns at once; when the reply comes, the
bus thread (which reads the target's DEALER: :meth:`ContinuedCalls.bus_reads`) resolves it and runs
``then(outcome)``: the reply's body, or the typed error (a refusal, the peer failed by ``fail_pending``, the
bus stopping, or ``RequestTimeout`` from :meth:`ContinuedCalls.sweep` once its deadline passed). ``then`` runs
exactly once, on whichever thread completed the request (the bus thread for a reply; the caller's for a send
refused at once; the sweeper's for a timeout): it must be short and never block (the lanes actor posts it to
itself). No thread waits for the reply: a round trip wakes the bus thread (reading the reply) and whoever
``then`` hands the outcome to, where a pool thread was woken to send and to wait before (issue 34).

It uses the bus's own request table and send path (the same ones :meth:`Bus.send_request` uses), so a
continued request is failed, forgotten and counted as any other.
"""

from __future__ import annotations

import itertools
import os
import threading
import time
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from actors.bus.parts import PendingReply
from actors.bus.transport import request_frame
from geode.protocol.errors import GeodeError, RequestTimeout, Unavailable
from geode.protocol.transport import unwrap

if TYPE_CHECKING:
    from actors.bus.socket_thread import Bus

Outcome = Any  # the reply's body, or the GeodeError it failed with
Then = Callable[[Outcome], None]


class ContinuedReply(PendingReply):
    """A pending request whose ``set`` (by the bus: reply in, or failed) runs its continuation."""

    __slots__ = ("mid", "then")
    inline = True  # the bus thread reading its reply runs it at once (Inbound._resolve), not before it sleeps

    def __init__(self, target: str, type_: str, mid: str, then: Then, forget: Callable[[], Any]) -> None:
        super().__init__(target, type_, _forget=forget)
        self.mid = mid
        self.then: Then | None = then

    def set(self) -> None:
        super().set()
        then, self.then = self.then, None  # once: only the one who took it off the bus's table sets it
        if then is None:
            return
        if self.error is not None:
            out: Outcome = self.error
        else:
            assert self.reply is not None
            try:
                out = self.reply.body if self.reply.kind != "error" else unwrap(self.reply)
            except GeodeError as exc:
                out = exc
        then(out)


class ContinuedCalls:
    """Requests over one bus whose replies are handed to a callback; :meth:`sweep` times them out."""

    def __init__(self, bus: Bus) -> None:
        self._bus = bus
        self._prefix = os.urandom(5).hex()  # as BusTransport: unique ids without a syscall per message
        self._seq = itertools.count(1)
        self._inflight: dict[str, tuple[float, ContinuedReply]] = {}  # mid -> (monotonic deadline, request)
        self._mu = threading.Lock()

    def bus_reads(self, target: str) -> None:
        """Have the bus thread read ``target``'s DEALER (its replies), as ``connect_peer`` does, without a
        peer's hellos: a continued request has no waiter that would read it. A blocking request to ``target``
        still works (its caller waits on its request's lock, released by the bus thread)."""
        bus = self._bus

        def attach() -> None:
            client = bus._client(target)
            reader = client.reader
            if reader is not None and reader.active:
                reader.active = False
                bus._register(client.wire.fd, partial(bus._on_dealer, client))
                bus._hot.add(client.wire.fd)  # a reply may wait already (its fd's edge consumed)

        bus._on_bus(attach)

    def call(
        self,
        target: str,
        type_: str,
        body: BaseModel | dict[str, Any] | None,
        then: Then,
        *,
        session: str | None = None,
        timeout_s: float = 5.0,
    ) -> None:
        """Send now; ``then(outcome)`` later (see the module's docstring). Raises ``Unavailable`` (and calls
        nothing) when the bus is not running."""
        bus = self._bus
        if bus._closed or bus._thread is None:
            raise Unavailable(f"bus {bus.sender} is not running")
        mid = f"{self._prefix}{next(self._seq):014x}"
        frame = request_frame(bus, mid, target, type_, body, session, timeout_s)
        p = ContinuedReply(
            target, type_, mid, partial(self._done, mid, then), partial(bus._pending.pop, mid, None)
        )
        with self._mu:
            self._inflight[mid] = (time.monotonic() + timeout_s, p)
        bus._pending[mid] = p
        bus._send_to(target, frame, mid)  # a refusal fails it here (then runs on this thread)

    def _done(self, mid: str, then: Then, out: Outcome) -> None:
        with self._mu:
            self._inflight.pop(mid, None)
        then(out)

    def sweep(self, now: float | None = None) -> int:
        """Fail every request whose deadline passed with ``RequestTimeout`` (call it from a ticking thread);
        a reply that comes later finds no request and is dropped, as a blocking caller's late reply is.
        Returns how many were failed."""
        now = time.monotonic() if now is None else now
        with self._mu:
            due = [p for deadline, p in self._inflight.values() if deadline <= now]
        failed = 0
        for p in due:
            if self._bus._pending.pop(p.mid, None) is None:  # the bus resolved it meanwhile: its set runs
                continue
            p.error = RequestTimeout(f"no reply from {p.target!r} to {p.type} in time")
            p.set()
            failed += 1
        return failed

    def inflight(self) -> int:
        with self._mu:
            return len(self._inflight)
