"""The replies on a request-only DEALER, read by the threads that wait for them (no bus thread in between).

A DEALER the bus opened to send requests and casts (not a peer connection that takes pushes,
``Bus.connect_peer``) only ever receives replies. The bus thread does not poll it: a caller waiting for its
reply reads the socket itself. One waiter at a time leads: it polls the socket's edge-triggered ``ZMQ_FD``
and the reader's eventfd, reads every frame waiting (under the socket's lock) and resolves each reply's
pending request; the other waiters follow, each on its own request's lock, which the leader releases when it
reads their reply. A leader whose reply came leaves and promotes the first follower still waiting. A reply
nobody waits for yet stays in the socket until someone waits. So a round trip wakes one thread on the
client, the caller, where the bus thread and then the caller woke before (docs/runtime.md, "Threads").

Every wake a leader could miss is covered: a send by another thread that consumed the fd's edge with a frame
waiting kicks the eventfd (``PollLoop._readable``), as does a request failed by the bus (``fail_pending``,
a peer that cannot be reached, the bus stopping); and a follower re-checks every ``FOLLOW_SLICE_S`` whether
someone leads. A frame that is not a reply goes to the bus thread.
"""

from __future__ import annotations

import os
import select
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

from actors.bus.shared_socket import SharedSocket

FOLLOW_SLICE_S = 0.05  # a follower looks again this often whether nobody leads (a lost promotion)
LEAD_SLICE_S = 0.5  # a leader looks again this often whether its wait was failed without a kick
DRAIN_CAP = 512  # frames read per pass before the leader resolves them


class PendingReply(Protocol):
    """A request in flight as the reader needs it (``actors.bus.parts.PendingReply``): its lock is held until
    it is set (``set`` releases it)."""

    reply: Any
    error: Any
    _done: threading.Lock

    def set(self) -> None: ...

    def is_set(self) -> bool: ...


FrameHandler = Callable[[bytes, Any], None]  # (a frame, the leader's request)


class ReplyReader:
    """Waiters of one request-only DEALER take turns reading it: :meth:`wait` instead of the bus thread."""

    __slots__ = ("_handle", "_poll", "active", "followers", "leader", "mx", "wake_fd", "wire")

    def __init__(self, wire: SharedSocket, handle: FrameHandler) -> None:
        self.wire = wire
        self._handle = handle  # (frame, the leader's request): resolves a reply, passes anything else on
        self.mx = threading.Lock()
        self.leader: PendingReply | None = None
        self.followers: list[PendingReply] = []
        self.active = True  # False once the bus thread reads the socket (connect_peer): waiters follow only
        self.wake_fd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        self._poll = select.poll()  # only the leader polls: one at a time
        self._poll.register(wire.fd, select.POLLIN)
        self._poll.register(self.wake_fd, select.POLLIN)

    def wait(self, p: PendingReply, timeout_s: float) -> bool:
        """Wait until ``p`` is set (True, its lock then held, as ``Lock.acquire``) or ``timeout_s`` passes."""
        if p._done.acquire(blocking=False):  # read already (by an earlier leader): nothing to wait for
            return True
        end = time.monotonic() + max(0.0, timeout_s)
        while True:
            with self.mx:
                lead = self.active and self.leader is None
                if lead:
                    self.leader = p
                else:
                    self.followers.append(p)
            if lead:
                try:
                    closed = self._lead(p, end)
                finally:  # leave the lead: the first follower still waiting is promoted (none at 1 in flight)
                    with self.mx:
                        self.leader = None
                        nxt = self._next() if self.followers else None
                    if nxt is not None:
                        nxt.set()  # woken without a reply: it leads (or its reply came: it returns)
                if closed:  # the bus stopped: it fails every request in flight
                    return p._done.acquire(timeout=max(0.0, end - time.monotonic()))
                return p._done.acquire(blocking=False)
            left = end - time.monotonic()
            got = p._done.acquire(timeout=max(0.0, min(left, FOLLOW_SLICE_S)))
            with self.mx:
                promoted = not self._drop(p)  # a leaver took it off the list: its release comes or came
            if promoted and not got:
                p._done.acquire()  # take that release: the lock is held again, as before the wait
                got = True
            if got and (p.reply is not None or p.error is not None):
                return True
            # promoted (the lock released to hand it the lead, held again now: not set), or a slice passed
            # (lead if nobody does)
            if not got and left <= FOLLOW_SLICE_S:
                return False

    def _drop(self, p: PendingReply) -> bool:
        """Take ``p`` off the followers (under ``mx``); False when it was not on the list."""
        for i, f in enumerate(self.followers):
            if f is p:
                del self.followers[i]
                return True
        return False

    def _lead(self, p: PendingReply, end: float) -> bool:
        """Read and resolve until ``p`` is set or ``end``; True when the socket was closed under us."""
        wire, handle, done = self.wire, self._handle, p._done
        look = True  # not told the socket is readable: ask ZMQ_EVENTS before receiving (no zmq.Again)
        cap = 1  # the first look reads one frame: most often the awaited reply (done: no burst check)
        while True:
            # woken by the fd, or the first look: one frame, no ZMQ_EVENTS after it (most often the awaited
            # reply: done, and whoever leads next looks first); otherwise the next pass looks (ZMQ_EVENTS
            # re-arms the edge) before any sleep
            frames = wire.drain(cap, look)
            if frames is None:
                return True
            for frame in frames:
                handle(frame, p)
            if not done.locked():  # p.is_set() without its call
                return False
            if len(frames) == cap:
                look, cap = True, DRAIN_CAP
                continue  # more may wait (and the edge is not re-armed): read on before sleeping
            left = end - time.monotonic()
            if left <= 0:
                return False
            look = True
            for fd, ev in self._poll.poll(min(left, LEAD_SLICE_S) * 1000):
                if fd == self.wake_fd:
                    if ev & select.POLLNVAL:
                        return True  # closed by Bus.stop
                    try:
                        os.eventfd_read(fd)
                    except OSError:
                        pass
                else:
                    look = False  # the socket's edge fired: a frame most likely waits
            cap = DRAIN_CAP if look else 1

    def _next(self) -> PendingReply | None:
        """The first follower still waiting, taken off the list (under ``mx``): the one a leaver promotes."""
        while self.followers:
            f = self.followers.pop(0)
            if f.reply is None and f.error is None and not f.is_set():
                return f
        return None

    def kick(self) -> None:
        """Wake the leader (a send consumed the fd's edge with a frame waiting; a request failed)."""
        with self.mx:
            if self.leader is not None and self.wake_fd >= 0:
                try:
                    os.eventfd_write(self.wake_fd, 1)
                except OSError:
                    pass

    def close(self) -> None:
        """Close the eventfd (the bus stopped and its sockets are closed: a leader finds them closed)."""
        with self.mx:
            if self.wake_fd >= 0:
                os.close(self.wake_fd)
                self.wake_fd = -1
