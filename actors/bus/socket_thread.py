"""The per-process message bus: a calling thread sends its request, a handler thread its reply, itself (under
the socket's lock); one bus thread receives on every socket and owns the rest (PUB, SUB, ZAP, monitors).

Requests are ROUTER/DEALER with correlation ids and deadlines; served requests are validated by
``geode.protocol.transport.dispatch`` and run on a :class:`HandlerPool` of plain threads (a service that
owns state posts to its own pykka actor from there, e.g. ``actors/lanes.py``). This module holds the
Bus's lifecycle and public API; its bus thread is ``actors/bus/poll_loop.py``, what arrives is
``actors/bus/inbound.py``.
See docs/runtime.md.
"""

from __future__ import annotations

import itertools
import logging
import os
import queue
import select
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable
from functools import partial
from typing import Any

import zmq

from actors.bus.endpoints import Endpoints
from actors.bus.event_lanes import EventLanes
from actors.bus.handler_pool import HandlerPool
from actors.bus.inbound import Inbound
from actors.bus.parts import Client, EventHandler, FnService, PeerHandler, PendingReply, Served, Sub
from actors.bus.tcp_refusals import HandshakeWatch
from actors.bus.transport import BusTransport
from actors.bus.zap import ZapHandler
from geode.home import GeodeHome
from geode.protocol import codec, runtime
from geode.protocol.envelope import Envelope
from geode.protocol.errors import GeodeError, Unavailable
from geode.protocol.transport import Service
from geode.telemetry import spans

log = logging.getLogger(__name__)


class Bus(Inbound):
    """One per process (or per actor group in single-process mode); sender string ``<name>#<incarnation>``."""

    def __init__(
        self,
        name: str,
        incarnation: int = 1,
        home: GeodeHome | None = None,
        single_process: bool = False,
        *,
        endpoints: Endpoints | None = None,
        context: zmq.Context | None = None,  # type: ignore[type-arg]
        workers: int | None = None,
        hello_interval_s: float = 1.0,
    ) -> None:
        self.name = name
        self.incarnation = incarnation
        self.sender = f"{name}#{incarnation}"
        self.home = home or GeodeHome.from_env()
        self.endpoints = endpoints or Endpoints.from_config(self.home, single_process)
        self.single_process = single_process
        self._ctx = context or (zmq.Context.instance() if single_process else zmq.Context())
        self._own_ctx = context is None and not single_process
        self._workers = workers or self.endpoints.workers
        self._hello_interval = hello_interval_s
        self._ops = queue.SimpleQueue()
        self._wake_fd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        self._wake_lock = threading.Lock()
        self._pending: dict[str, PendingReply] = {}
        self._served: dict[str, Served] = {}
        self._clients: dict[str, Client] = {}
        self._subs: dict[Any, Sub] = {}
        self._handlers: dict[Any, Callable[[], None]] = {}
        self._wires = {}
        self._hot = set()
        self._handoffs = []
        self._drains = deque()
        self._reading = None
        self._pub: zmq.Socket | None = None  # type: ignore[type-arg]
        self._pub_file: tuple[str, int] | None = None
        self._zap: ZapHandler | None = None
        self._watches: list[HandshakeWatch] = []  # tcp-served endpoints: refused handshakes, logged
        self._poller = select.poll()  # file descriptors only (PollLoop._register)
        self._poller.register(self._wake_fd, select.POLLIN)
        self._thread: threading.Thread | None = None
        self._stopping = False
        self._closed = False
        self._idle = True
        self._woken = False
        self._peer_clients = 0
        # deferred replies outstanding: key -> (monotonic deadline, Later); swept on the bus thread
        self._deferred = {}
        self._deferred_seq = itertools.count()
        self._next_sweep = 0.0
        self.deferred_dropped = 0
        self.transport = BusTransport(self)

    # ---- lifecycle -------------------------------------------------------------------------------
    def start(self) -> Bus:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name=f"bus-{self.name}", daemon=True)
            self._thread.start()
        return self

    def stop(self, timeout_s: float = 2.0) -> None:
        """Close every socket and stop the handler pools; bounded, never hangs."""
        if self._closed:
            return
        self._closed = True
        self._stopping = True
        if self._thread is not None and self._thread.is_alive():
            self._wake()
            self._thread.join(timeout_s)
        else:
            self._close_sockets()
        for pool in self._pools():
            pool.stop()
        alive = self._thread is not None and self._thread.is_alive()
        if self._own_ctx and not alive:
            t = threading.Thread(target=self._ctx.term, daemon=True)
            t.start()
            t.join(timeout_s)
        if not alive:
            with self._wake_lock:
                os.close(self._wake_fd)
                self._wake_fd = -1
            for client in self._clients.values():
                if client.reader is not None:
                    client.reader.close()

    close = stop

    def __enter__(self) -> Bus:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ---- public API ------------------------------------------------------------------------------
    def serve(
        self,
        endpoint: str,
        service: Service,
        *,
        concurrency: int | None = None,
        on_peer: Callable[[str, int], None] | None = None,
        max_backlog: int = 10_000,
    ) -> None:
        """Bind a ROUTER at ``endpoint``; requests run on ``concurrency`` handler threads.

        Past ``max_backlog`` requests waiting for a free handler, new ones get ``overloaded`` at once.
        """

        def bind() -> None:
            if self.endpoints.is_tcp(endpoint) and self.endpoints.curve is not None and self._zap is None:
                self._zap = ZapHandler(self._ctx, self.endpoints.curve)
                self._register(self._zap.sock, self._zap.handle)
            sock = self._socket(zmq.ROUTER, heartbeats=self.endpoints.is_tcp(endpoint))
            try:
                self.endpoints.bind(sock, endpoint)
            except Exception:
                sock.close(0)
                raise
            pool = HandlerPool(concurrency or self._workers, f"{endpoint}-handlers", max_backlog)
            served = Served(endpoint, sock, service, pool, on_peer, ipc_file=self._ipc_file(endpoint))
            served.inline = frozenset(getattr(service, "inline_types", ()))
            served.batch = not self.endpoints.is_tcp(endpoint)  # a tcp peer may be of another release
            served.wire.batch = served.batch  # (its outbox's replies too)
            self._register_wire(served.wire, partial(self._on_router, served))
            self._served[endpoint] = served
            if self.endpoints.is_tcp(endpoint):  # refusals before ZAP is asked, logged with the address
                watch = HandshakeWatch(sock, endpoint)
                self._watches.append(watch)
                self._register(watch.sock, watch.handle)

        self._on_bus(bind)

    def connect_peer(
        self,
        endpoint: str,
        on_cast: PeerHandler | Service,
        *,
        concurrency: int = 2,
        on_connected: Callable[[], None] | None = None,
    ) -> None:
        """Stay connected to ``endpoint`` and handle the casts/requests it pushes to us (by our name).
        ``on_connected`` runs on the bus thread (keep it short) each time the connection's handshake
        completes again, right after our hello: e.g. a loop worker heartbeats a restarted lanes at once."""
        service = on_cast if isinstance(on_cast, Service) else FnService(on_cast)

        def attach() -> None:
            client = self._client(endpoint)
            if client.service is None:
                self._peer_clients += 1
            if client.reader is not None and client.reader.active:  # pushes come: the bus thread reads it
                client.reader.active = False
                self._register(client.wire.fd, partial(self._on_dealer, client))
                self._hot.add(client.wire.fd)  # a send may have consumed the edge of what waits
            client.service = service
            client.pool = HandlerPool(concurrency, f"{endpoint}-peer")
            client.next_hello = 0.0
            client.on_connected = on_connected
            if client.monitor is None:  # a restarted server learns our name at its first handshake
                client.monitor = client.wire.monitor(
                    zmq.EVENT_HANDSHAKE_SUCCEEDED, f"inproc://geode-monitor-{uuid.uuid4().hex}"
                )
                self._register(client.monitor, partial(self._on_peer_handshake, client))
            self._send_hellos(time.monotonic())

        self._on_bus(attach)

    def _send_hellos(self, now: float) -> None:
        """Say hello on each peer connection whose ``next_hello`` came; note when the next one is due."""
        due = now + self._hello_interval
        for c in self._clients.values():
            if c.service is None:
                continue
            if now >= c.next_hello:
                c.next_hello = now + self._hello_interval
                body = runtime.Hello(
                    name=self.name, incarnation=self.incarnation, pid=os.getpid(), trace=True
                )
                env = Envelope(
                    kind="cast", type=runtime.HELLO, body=body.model_dump(), **{"from": self.sender}
                )
                self._send_raw(c.sock, [codec.encode(env)])
            elif c.next_hello < due:
                due = c.next_hello
        self._next_hello = due

    def _on_peer_handshake(self, client: Client) -> None:
        """Our connection to a peer endpoint (re)completed its handshake, e.g. to a restarted lanes: say
        hello now, not at the next interval, so the new server can push to us (queued turns) at once."""
        assert client.monitor is not None
        seen = False
        for _ in range(64):
            try:
                client.monitor.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                break
            seen = True
        if seen:
            client.next_hello = 0.0
            self._send_hellos(time.monotonic())
            if client.on_connected is not None:
                try:
                    client.on_connected()
                except Exception:  # the owner's hook must not take the bus thread down
                    log.exception("bus %s: on_connected for %s failed", self.sender, client.target)

    def peers(self, endpoint: str) -> list[str]:
        """Names (``loop-1``) of peers that announced themselves to our served ``endpoint``."""
        served = self._served.get(endpoint)
        return sorted(k for k in list(served.peers) if "#" not in k) if served else []

    def publish(self, topic: str, body: dict[str, Any] | None = None) -> None:
        """Publish a lifecycle event on our PUB socket (endpoint ``<name>.events``); lossy by design."""
        env = Envelope(kind="cast", type=topic, body=body or {}, **{"from": self.sender})
        frame = codec.encode(env)
        self._post(partial(self._send_pub, topic.encode(), frame))

    def subscribe(self, endpoint: str, on_event: EventHandler) -> None:
        """Receive ``on_event(topic, body)`` for every event published by the bus named ``endpoint``."""

        def sub() -> None:  # one SUB socket per endpoint, a lane (thread while busy) per subscriber
            for s in self._subs.values():
                if isinstance(s.pool, EventLanes) and s.pool.endpoint == endpoint:
                    s.pool.add(on_event)
                    return
            sock = self._socket(zmq.SUB)
            sock.setsockopt(zmq.SUBSCRIBE, b"")
            self.endpoints.connect(sock, f"{endpoint}.events")
            lanes = EventLanes(endpoint)
            lanes.add(on_event)
            s = Sub(sock, lanes.deliver, lanes)
            self._subs[sock] = s
            self._register(sock, partial(self._on_sub, s))

        self._on_bus(sub)

    def fail_pending(self, target: str, error: GeodeError) -> int:
        """Fail every request in flight to ``target`` with ``error`` (its peer died: no reply will come).

        Runs on the bus thread (every request made before this call was sent when it was made); later
        requests are not touched (they go to the peer's next incarnation). Returns how many were failed."""
        failed: list[str] = []

        def op() -> None:
            for mid, p in list(self._pending.items()):
                if p.target == target:
                    failed.append(mid)
                    self._fail(mid, type(error)(error.message, code=error.code))

        self._on_bus(op)
        return len(failed)

    # ---- used by BusTransport --------------------------------------------------------------------
    def request(self, target: str, env: Envelope, timeout_s: float) -> Envelope:
        """Send a request and block for its reply (``RequestTimeout`` after ``timeout_s``)."""
        if threading.get_ident() == self._bus_ident:
            raise RuntimeError("a blocking request from the bus thread would deadlock")
        return self.request_nowait(target, env).result(timeout_s)

    def request_nowait(self, target: str, env: Envelope) -> PendingReply:
        """Send a request without waiting; call ``.result(timeout_s)`` on the returned handle."""
        return self.send_request(target, codec.encode(env), env.id, env.type)

    def send_request(
        self, target: str, frame: bytes, mid: str, type_: str, blocking: bool = False
    ) -> PendingReply:
        """Send a request's packed frame (its id ``mid``, its type ``type_``) without waiting; call
        ``.result(timeout_s)`` on the returned handle (``BusTransport``: the frame packed from its fields).
        ``blocking``: the caller waits for it at once, which the bus thread must not."""
        if blocking and threading.get_ident() == self._bus_ident:
            raise RuntimeError("a blocking request from the bus thread would deadlock")
        if self._closed or self._thread is None:
            raise Unavailable(f"bus {self.sender} is not running")
        p = PendingReply(target, type_, _forget=partial(self._pending.pop, mid, None))
        self._pending[mid] = p
        wire = self._send_to(target, frame, mid)  # on this thread: no hand-off to the bus thread
        if wire is not None and wire.reader is not None and wire.reader.active:
            p.reader = wire.reader  # its reply is read by whoever waits (result()), not the bus thread
        return p

    def trace_for(self, target: str) -> str | None:
        """The ``trace`` for an envelope to ``target`` now: the current span's, when tracing is on and the
        target takes it (a peer that said so in its hello, or a server of this tree reached by ipc)."""
        traceparent = spans.outgoing()
        if traceparent is None:
            return None
        for served in list(self._served.values()):
            if target in served.peers:
                return traceparent if target in served.trace_peers else None
        return None if self.endpoints.connect_address(target).startswith("tcp://") else traceparent

    def send_cast(self, target: str, env: Envelope) -> None:
        self.send_cast_frame(target, codec.encode(env))

    def send_cast_frame(self, target: str, frame: bytes) -> None:
        """Send a cast's packed frame (``BusTransport``: packed from its fields)."""
        if self._closed or self._thread is None:
            raise Unavailable(f"bus {self.sender} is not running")
        self._send_to(target, frame, None)


__all__ = ["Bus", "BusTransport", "PendingReply"]
