"""The bus thread of :class:`actors.bus.socket_thread.Bus`: its poll loop, the queue other threads post work
to, its sockets, and sending frames to peers (replies resolve or fail the pending requests).

The ROUTERs and DEALERs are each a :class:`~actors.bus.shared_socket.SharedSocket`: a calling thread sends its
request, a handler thread its reply, itself, under the socket's lock; the bus thread polls their ``ZMQ_FD``
and receives (a DEALER that only sends requests and casts is read by the callers waiting for its replies:
``actors/bus/reply_reader.py``). Every other socket (PUB, SUB, ZAP, monitors) is the bus thread's alone.

It sleeps in one ``select.poll`` over file descriptors only (``PollLoop._register``): ``zmq.Poller`` made a
zero-timeout pass before each sleep and asked ``ZMQ_EVENTS`` of every zmq socket in the set on each pass."""

from __future__ import annotations

import errno
import itertools
import logging
import os
import queue
import select
import threading
import time
from collections import deque
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any

import zmq

from actors.bus.endpoints import Endpoints
from actors.bus.handler_pool import HandlerPool
from actors.bus.parts import Client, PendingReply, Served, Sub, make_socket, unlink_if_same
from actors.bus.reply_outbox import queue_for_bus, send_outboxes
from actors.bus.reply_reader import ReplyReader
from actors.bus.shared_socket import EVENTS, POLLIN, SharedSocket
from actors.bus.tcp_refusals import HandshakeWatch
from actors.bus.zap import ZapHandler
from geode.protocol.errors import GeodeError, Overloaded, RequestTimeout, Unavailable
from geode.protocol.later import Later
from geode.work_tally import HANDOFF_POST, HANDOFF_WAKE
from geode.work_tally import ON as TALLY_ON
from geode.work_tally import handoff as tally

log = logging.getLogger("actors.bus.socket_thread")


class PollLoop:
    """The bus thread's half of a Bus; the state is set up by ``Bus.__init__``."""

    name: str
    incarnation: int
    sender: str
    endpoints: Endpoints
    _ctx: zmq.Context  # type: ignore[type-arg]
    _hello_interval: float
    _ops: queue.SimpleQueue[Callable[[], object]]
    _wake_fd: int
    _wake_lock: threading.Lock
    _pending: dict[str, PendingReply]
    _served: dict[str, Served]
    _clients: dict[str, Client]
    _subs: dict[Any, Sub]
    _handlers: dict[Any, Callable[[], None]]
    _wires: dict[Any, SharedSocket]  # a ROUTER's or DEALER's zmq socket -> the SharedSocket around it
    _hot: set[int]  # wires' fds to read without waiting for their edge (a send consumed it, or a cap hit)
    _handoffs: list[Callable[[], None]]  # replies to release, jobs to queue: run right before the bus sleeps
    _drains: deque[SharedSocket]  # wires with replies queued for the bus thread: sent right before it sleeps
    _reading: SharedSocket | None  # the wire the bus thread is reading until empty, while it does
    _pub: zmq.Socket | None  # type: ignore[type-arg]
    _pub_file: tuple[str, int] | None
    _zap: ZapHandler | None
    _watches: list[HandshakeWatch]
    _poller: Any  # a select.poll over file descriptors only
    _thread: threading.Thread | None
    _stopping: bool
    _closed: bool
    _idle: bool
    _woken: bool  # an eventfd write is on its way since the bus thread last went idle: no second one
    _peer_clients: int
    _bus_ident: int | None = None  # the bus thread's ident, once it runs (a cheaper "am I the bus thread")
    _next_hello: float = 0.0  # when the first peer connection's hello is due (PollLoop._send_hellos)
    _deferred: dict[int, tuple[float, Later]]
    _deferred_seq: itertools.count[int]
    _next_sweep: float
    deferred_dropped: int

    if TYPE_CHECKING:  # defined by actors.bus.inbound.Inbound

        def _on_dealer(self, client: Client) -> None: ...

        def _lead_frame(self, client: Client, frame: bytes, waiter: PendingReply) -> None: ...

        def _sweep_deferred(self, now: float) -> None: ...

        def _send_hellos(self, now: float) -> None: ...  # defined by actors.bus.socket_thread.Bus

    # ---- plumbing (other threads) ----------------------------------------------------------------
    def _wake(self) -> None:
        tally(HANDOFF_WAKE)
        with self._wake_lock:  # never write to a closed (and maybe reused) fd number
            if self._wake_fd >= 0:
                try:
                    os.eventfd_write(self._wake_fd, 1)
                except OSError:
                    pass

    def _readable(self, wire: SharedSocket) -> None:
        """A send saw a frame waiting on ``wire`` (and may have consumed its fd's edge): have it read."""
        reader = wire.reader
        if reader is not None and reader.active:  # read by its waiters: wake the one reading
            reader.kick()
            return
        self._hot.add(wire.fd)
        if self._idle and not self._woken and threading.current_thread() is not self._thread:
            self._woken = True
            self._wake()

    def _post(self, op: Callable[[], object]) -> None:
        if self._closed and (self._thread is None or not self._thread.is_alive()):
            return  # the bus is gone: nothing will run it
        if TALLY_ON and threading.current_thread() is not self._thread:  # the bus thread's own: no hand-off
            tally(HANDOFF_POST)
        self._ops.put(op)
        if self._idle and not self._woken:  # only wake a bus thread asleep in poll, and only once
            self._woken = True
            self._wake()

    def _on_bus(self, fn: Callable[[], object], timeout_s: float = 5.0) -> None:
        """Run ``fn`` on the bus thread and re-raise its exception here (inline before start)."""
        if self._thread is None or threading.current_thread() is self._thread:
            fn()
            return
        if self._closed:
            raise Unavailable(f"bus {self.sender} is stopped")
        done = threading.Event()
        err: list[BaseException] = []

        def op() -> None:
            try:
                fn()
            except BaseException as exc:
                err.append(exc)
            finally:
                done.set()

        self._post(op)
        if not done.wait(timeout_s):
            raise RequestTimeout("bus thread did not answer")
        if err:
            raise err[0]

    def _pools(self) -> list[HandlerPool]:
        pools = [s.pool for s in self._served.values()] + [s.pool for s in self._subs.values()]
        return pools + [c.pool for c in self._clients.values() if c.pool is not None]

    # ---- bus thread ------------------------------------------------------------------------------
    def _run(self) -> None:
        self._bus_ident = threading.get_ident()
        ops, hot, poll, handlers = self._ops, self._hot, self._poller.poll, self._handlers
        drains = self._drains
        try:
            while not self._stopping:  # per pass, only what has work is called (a pass a frame, often)
                if self._handoffs or drains:
                    self._hand_off()
                timeout = 1000 if not self._peer_clients else max(1, int(self._hello_interval * 500))
                self._woken = False  # first, so that a poster who sees us idle writes the eventfd
                self._idle = True  # posters now wake us; re-check the queue so no post is missed
                ready = poll(0 if hot or drains or not ops.empty() else timeout)
                self._idle = False
                for sock, _ in ready:
                    if sock == self._wake_fd:
                        self._drain_wake()
                        continue
                    handler = handlers.get(sock)  # (not through _handle_ready: one call fewer a wake)
                    if handler is not None:
                        try:
                            handler()
                        except Exception:  # one bad socket event must not take the bus thread down
                            log.exception("bus %s: socket handler failed", self.sender)
                if hot:
                    for _ in range(256):  # bounded: a handler that keeps its fd hot must not starve the poll
                        self._handle_ready(hot.pop())
                        if not hot:
                            break
                if not ops.empty():
                    self._run_ops()
                if self._peer_clients or self._deferred:  # due work only: no call on a pass it is not due
                    now = time.monotonic()
                    if self._peer_clients and now >= self._next_hello:
                        self._send_hellos(now)
                    if self._deferred and now >= self._next_sweep:
                        self._sweep_deferred(now)
        except Exception:
            log.exception("bus thread %s crashed", self.sender)
        finally:
            self._hand_off()
            self._close_sockets()

    def _hand_off(self) -> None:
        """Wake the threads this pass has work for, as late as possible: a thread woken while the bus thread
        still runs Python waits for the GIL (one more context switch) until the bus thread sleeps in poll."""
        send_outboxes(self._drains)  # replies other threads queued for this one (_send_raw), first
        handoffs, self._handoffs = self._handoffs, []
        for fn in handoffs:
            try:
                fn()
            except Exception:
                log.exception("bus %s: a hand-off failed", self.sender)

    def _handle_ready(self, sock: Any) -> None:
        handler = self._handlers.get(sock)
        if handler is None:
            return
        try:
            handler()
        except Exception:  # one bad socket event must not take the bus thread down
            log.exception("bus %s: socket handler failed", self.sender)

    def _drain_wake(self) -> None:
        try:
            os.eventfd_read(self._wake_fd)
        except BlockingIOError:
            pass

    def _run_ops(self) -> None:
        ops = self._ops
        while not ops.empty():
            op = ops.get_nowait()
            try:
                op()
            except Exception:
                log.exception("bus op failed")

    def _socket(self, kind: int, *, heartbeats: bool = False) -> zmq.Socket:  # type: ignore[type-arg]
        self._owned()
        return make_socket(self._ctx, kind, self.sender, heartbeats=heartbeats)

    def _owned(self) -> None:
        """Sockets are not thread-safe: only the bus thread (or anyone before it starts / after it ended)."""
        t = self._thread
        if t is not None and threading.current_thread() is not t and t.is_alive():
            who = threading.current_thread().name
            raise RuntimeError(f"bus {self.sender}: zmq socket used from thread {who!r}, not the bus thread")

    def _register(self, sock: Any, handler: Callable[[], None]) -> None:
        """Poll ``sock``: a file descriptor, or a zmq socket of the bus thread's own (SUB, ZAP, a monitor) by
        its edge-triggered ``ZMQ_FD``, its handler run by :meth:`_own`."""
        if isinstance(sock, int):
            fd = sock
        else:
            fd = int(sock.getsockopt(zmq.FD))
            handler = partial(self._own, sock, fd, handler)
            self._hot.add(fd)  # what waits already (its fd's edge may be gone): read at the next pass
        self._handlers[fd] = handler
        self._poller.register(fd, select.POLLIN)

    def _own(self, sock: Any, fd: int, handler: Callable[[], None]) -> None:
        """Run the handler of a socket of the bus thread's own (it reads until empty, or its cap), then ask
        ``ZMQ_EVENTS``: a frame left is read at the next pass; none re-arms the edge of ``fd``."""
        try:
            handler()
        finally:
            if not sock.closed and sock.get(EVENTS) & POLLIN:
                self._hot.add(fd)

    def _register_wire(self, wire: SharedSocket, handler: Callable[[], None]) -> None:
        """Poll a shared socket's ``ZMQ_FD`` (edge-triggered: ``handler`` reads until nothing is left)."""
        self._wires[wire.sock] = wire
        wire.on_waiting = partial(self._readable, wire)  # (a reply sent from its outbox saw a frame waiting)
        self._register(wire.fd, handler)

    def _client(self, target: str) -> Client:
        client = self._clients.get(target)
        if client is None:
            sock = self._socket(zmq.DEALER, heartbeats=self.endpoints.is_tcp(target))
            try:
                self.endpoints.connect(sock, target)
            except Exception:
                sock.close(0)
                raise
            client = Client(target, sock)
            self._wires[sock] = client.wire  # not polled: its waiters read it (connect_peer: the bus thread)
            client.reader = client.wire.reader = ReplyReader(client.wire, partial(self._lead_frame, client))
            self._clients[target] = client  # last: other threads send on it from now on
        return client

    def _send_raw(self, sock: Any, frames: list[bytes]) -> bool:
        """Send on a ROUTER/DEALER from any thread (under its lock), any other socket on the bus thread."""
        wire = self._wires.get(sock)
        if wire is None:
            self._owned()
        try:
            if wire is None:
                sock.send_multipart(frames, zmq.NOBLOCK)
            else:
                on_bus = threading.get_ident() == self._bus_ident  # (queue_for_bus: sent by the bus thread)
                if (on_bus or not queue_for_bus(self, wire, frames)) and (
                    wire.send(frames, False) if on_bus and wire is self._reading else wire.reply(frames)
                ):
                    self._readable(wire)  # (reply: the lock taken -> its outbox, sent by the lock's holder)
            return True
        except zmq.ZMQError as exc:
            if wire is None or not wire.closed:  # a reply after stop() closed the socket: nobody to tell
                log.warning("send dropped: %s", exc)
            return False

    def _forget_rid(self, rid: bytes) -> None:
        for served in self._served.values():
            for k in [k for k, v in served.peers.items() if v == rid]:
                del served.peers[k]

    def _send_to(self, target: str, frame: bytes, mid: str | None) -> SharedSocket | None:
        """Send a request or cast on the calling thread: to a peer by its routing id on our ROUTER, else on
        our DEALER to ``target`` (created once, on the bus thread). A refusal fails the pending request.
        Returns the socket it went out on (its reply comes back on it), None when it was refused."""
        route: tuple[SharedSocket, bytes] | None = None
        try:
            for served in tuple(self._served.values()):  # _peer_route without its call (every send)
                rid = served.peers.get(target)
                if rid is not None:
                    route = served.wire, rid
                    break
            if route is not None:
                wire, frames = route[0], [route[1], frame]
            else:
                client = self._clients.get(target)
                if client is None:
                    self._on_bus(partial(self._client, target))
                    client = self._clients[target]
                wire, frames = client.wire, [frame]
            if wire.send(frames):
                self._readable(wire)
            return wire
        except zmq.Again:
            self._fail(mid, Overloaded(f"send queue to {target!r} is full"))
        except zmq.ZMQError as exc:
            if exc.errno == errno.EHOSTUNREACH and route is not None:
                self._post(partial(self._forget_rid, route[1]))  # the bus thread's peers table
            self._fail(mid, Unavailable(f"cannot reach {target!r}: {exc}"))
        except GeodeError as exc:
            self._fail(mid, exc)
        return None

    def _fail(self, mid: str | None, err: GeodeError) -> None:
        p = self._pending.pop(mid, None) if mid else None
        if p is None:
            log.warning("cast dropped: %s", err)
            return
        p.error = err
        p.set()
        if p.reader is not None:  # a waiter reading the socket itself polls it, not the request's lock
            p.reader.kick()

    def _send_pub(self, topic: bytes, frame: bytes) -> None:
        if self._pub is None:
            self._pub = self._socket(zmq.PUB)
            self.endpoints.bind(self._pub, f"{self.name}.events")
            self._pub_file = self._ipc_file(f"{self.name}.events")
        self._send_raw(self._pub, [topic, frame])

    def _ipc_file(self, endpoint: str) -> tuple[str, int] | None:
        path = self.endpoints.ipc_path(endpoint)
        try:
            return (path, os.stat(path).st_ino) if path else None
        except OSError:
            return None

    def _close_sockets(self) -> None:
        self._owned()
        for wire in list(self._wires.values()):
            wire.close()
        socks = [s.sock for s in self._subs.values()] + ([self._pub] if self._pub is not None else [])
        socks += [self._zap.sock] if self._zap is not None else []
        socks += [c.monitor for c in self._clients.values() if c.monitor is not None]
        socks += [w.sock for w in self._watches]
        for s in socks:
            try:
                s.close(0)
            except zmq.ZMQError:
                pass
        for served in self._served.values():
            if served.ipc_file is not None:
                unlink_if_same(*served.ipc_file)
        if self._pub_file is not None:
            unlink_if_same(*self._pub_file)
        for mid in list(self._pending):
            self._fail(mid, Unavailable("bus stopped"))
        for _, later in list(self._deferred.values()):
            later.drop()
        self._deferred.clear()
