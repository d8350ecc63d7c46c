"""The per-process message bus: one thread owns every ZeroMQ socket; other threads hand it work via a queue.

Requests are ROUTER/DEALER with correlation ids and deadlines; served requests are validated by
``geode.protocol.transport.dispatch`` and run on a :class:`HandlerPool` of plain threads (a service that
owns state posts to its own pykka actor from there, e.g. ``actors/lanes.py``). See docs/runtime.md.
"""

from __future__ import annotations

import errno
import itertools
import logging
import os
import queue
import threading
import time
import uuid
from collections.abc import Callable
from functools import partial
from typing import Any

import zmq
from pydantic import ValidationError

from actors.bus.endpoints import Endpoints
from actors.bus.handler_pool import HandlerPool
from actors.bus.parts import (
    ERROR_TYPE,
    Client,
    EventHandler,
    FnService,
    PeerHandler,
    PendingReply,
    Served,
    Sub,
    make_socket,
    unlink_if_same,
)
from actors.bus.tcp_refusals import HandshakeWatch
from actors.bus.transport import BusTransport
from actors.bus.zap import ZapHandler
from geode.home import GeodeHome
from geode.protocol import codec, runtime
from geode.protocol.envelope import Envelope, now_ms
from geode.protocol.errors import (
    BadRequest,
    ErrorCode,
    GeodeError,
    Overloaded,
    RequestTimeout,
    Unavailable,
)
from geode.protocol.later import Later
from geode.protocol.transport import DEFERRED_CAP_S, Service, dispatch_later

log = logging.getLogger(__name__)
DEFERRED_GRACE_S = 1.0  # past the caller's deadline before its deferred reply is dropped
DEFERRED_SWEEP_S = 1.0
INLINE_MAX_BYTES = 64 * 1024  # a larger frame of an inline type still goes to a handler thread


class Bus:
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
        self._ops: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()
        self._wake_fd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        self._wake_lock = threading.Lock()
        self._pending: dict[str, PendingReply] = {}
        self._served: dict[str, Served] = {}
        self._clients: dict[str, Client] = {}
        self._subs: dict[Any, Sub] = {}
        self._handlers: dict[Any, Callable[[], None]] = {}
        self._pub: zmq.Socket | None = None  # type: ignore[type-arg]
        self._pub_file: tuple[str, int] | None = None
        self._zap: ZapHandler | None = None
        self._watches: list[HandshakeWatch] = []  # tcp-served endpoints: refused handshakes, logged
        self._poller = zmq.Poller()
        self._poller.register(self._wake_fd, zmq.POLLIN)
        self._thread: threading.Thread | None = None
        self._stopping = False
        self._closed = False
        self._idle = True
        self._peer_clients = 0
        # deferred replies outstanding: key -> (monotonic deadline, Later); swept on the bus thread
        self._deferred: dict[int, tuple[float, Later]] = {}
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
            self._served[endpoint] = served
            self._register(sock, partial(self._on_router, served))
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
            client.service = service
            client.pool = HandlerPool(concurrency, f"{endpoint}-peer")
            client.next_hello = 0.0
            client.on_connected = on_connected
            if client.monitor is None:  # a restarted server learns our name at its first handshake
                client.monitor = client.sock.get_monitor_socket(
                    zmq.EVENT_HANDSHAKE_SUCCEEDED, addr=f"inproc://geode-monitor-{uuid.uuid4().hex}"
                )
                self._register(client.monitor, partial(self._on_peer_handshake, client))
            self._send_hellos(time.monotonic())

        self._on_bus(attach)

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

        def sub() -> None:
            sock = self._socket(zmq.SUB)
            sock.setsockopt(zmq.SUBSCRIBE, b"")
            self.endpoints.connect(sock, f"{endpoint}.events")
            s = Sub(sock, on_event, HandlerPool(1, f"{endpoint}-events"))
            self._subs[sock] = s
            self._register(sock, partial(self._on_sub, s))

        self._on_bus(sub)

    def fail_pending(self, target: str, error: GeodeError) -> int:
        """Fail every request in flight to ``target`` with ``error`` (its peer died: no reply will come).

        Runs on the bus thread, after every request posted before this call was sent; later requests are
        not touched (they go to the peer's next incarnation). Returns how many were failed."""
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
        if threading.current_thread() is self._thread:
            raise RuntimeError("a blocking request from the bus thread would deadlock")
        return self.request_nowait(target, env).result(timeout_s)

    def request_nowait(self, target: str, env: Envelope) -> PendingReply:
        """Send a request without waiting; call ``.result(timeout_s)`` on the returned handle."""
        if self._closed or self._thread is None:
            raise Unavailable(f"bus {self.sender} is not running")
        frame = codec.encode(env)
        p = PendingReply(target, env.type, _forget=partial(self._pending.pop, env.id, None))
        self._pending[env.id] = p
        self._post(partial(self._send_to, target, frame, env.id))
        return p

    def send_cast(self, target: str, env: Envelope) -> None:
        if self._closed or self._thread is None:
            raise Unavailable(f"bus {self.sender} is not running")
        self._post(partial(self._send_to, target, codec.encode(env), None))

    # ---- plumbing (other threads) ----------------------------------------------------------------
    def _wake(self) -> None:
        with self._wake_lock:  # never write to a closed (and maybe reused) fd number
            if self._wake_fd >= 0:
                try:
                    os.eventfd_write(self._wake_fd, 1)
                except OSError:
                    pass

    def _post(self, op: Callable[[], None]) -> None:
        if self._closed and (self._thread is None or not self._thread.is_alive()):
            return  # the bus is gone: nothing will run it
        self._ops.put(op)
        if self._idle:  # only wake a bus thread that is (about to be) asleep in poll
            self._wake()

    def _on_bus(self, fn: Callable[[], None], timeout_s: float = 5.0) -> None:
        """Run ``fn`` on the bus thread and re-raise its exception here (inline before start)."""
        if self._thread is None or threading.current_thread() is self._thread:
            fn()
            return
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
        try:
            while not self._stopping:
                timeout = 1000 if not self._has_peer_clients() else max(1, int(self._hello_interval * 500))
                self._idle = True  # posters now wake us; re-check the queue so no post is missed
                ready = self._poller.poll(0 if not self._ops.empty() else timeout)
                self._idle = False
                for sock, _ in ready:
                    if sock == self._wake_fd:
                        self._drain_wake()
                        continue
                    try:
                        self._handlers[sock]()
                    except Exception:  # one bad socket event must not take the bus thread down
                        log.exception("bus %s: socket handler failed", self.sender)
                self._run_ops()
                if self._has_peer_clients():
                    self._send_hellos(time.monotonic())
                if self._deferred:
                    self._sweep_deferred(time.monotonic())
        except Exception:
            log.exception("bus thread %s crashed", self.sender)
        finally:
            self._close_sockets()

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
        self._handlers[sock] = handler
        self._poller.register(sock, zmq.POLLIN)

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
            self._clients[target] = client
            self._register(sock, partial(self._on_dealer, client))
        return client

    def _has_peer_clients(self) -> bool:
        return self._peer_clients > 0

    def _send_hellos(self, now: float) -> None:
        for c in self._clients.values():
            if c.service is not None and now >= c.next_hello:
                c.next_hello = now + self._hello_interval
                body = runtime.Hello(name=self.name, incarnation=self.incarnation, pid=os.getpid())
                env = Envelope(
                    kind="cast", type=runtime.HELLO, body=body.model_dump(), **{"from": self.sender}
                )
                self._send_raw(c.sock, [codec.encode(env)])

    def _send_raw(self, sock: Any, frames: list[bytes]) -> bool:
        self._owned()
        try:
            sock.send_multipart(frames, zmq.NOBLOCK)
            return True
        except zmq.ZMQError as exc:
            log.warning("send dropped: %s", exc)
            return False

    def _peer_route(self, target: str) -> tuple[Any, bytes] | None:
        for served in self._served.values():
            rid = served.peers.get(target)
            if rid is not None:
                return served.sock, rid
        return None

    def _forget_rid(self, rid: bytes) -> None:
        for served in self._served.values():
            for k in [k for k, v in served.peers.items() if v == rid]:
                del served.peers[k]

    def _send_to(self, target: str, frame: bytes, mid: str | None) -> None:
        self._owned()
        try:
            route = self._peer_route(target)
            if route is not None:
                route[0].send_multipart([route[1], frame], zmq.NOBLOCK)
            else:
                self._client(target).sock.send(frame, zmq.NOBLOCK)
        except zmq.Again:
            self._fail(mid, Overloaded(f"send queue to {target!r} is full"))
        except zmq.ZMQError as exc:
            if exc.errno == errno.EHOSTUNREACH and route is not None:
                self._forget_rid(route[1])
            self._fail(mid, Unavailable(f"cannot reach {target!r}: {exc}"))
        except GeodeError as exc:
            self._fail(mid, exc)

    def _fail(self, mid: str | None, err: GeodeError) -> None:
        p = self._pending.pop(mid, None) if mid else None
        if p is None:
            log.warning("cast dropped: %s", err)
            return
        p.error = err
        p.set()

    def _resolve(self, env: Envelope) -> None:
        p = self._pending.pop(env.corr, None) if env.corr else None
        if p is not None:
            p.reply = env
            p.set()

    def _on_router(self, served: Served) -> None:
        sock = served.sock
        for _ in range(512):
            try:  # recv until empty: cheaper than asking getsockopt(ZMQ_EVENTS) before every frame
                parts = sock.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                return
            if len(parts) < 2:
                continue
            prefix, frame = parts[:-1], parts[-1]
            try:
                env = codec.decode(frame)
            except BadRequest as exc:
                self._send_raw(served.sock, [*prefix, self._bad_request_frame(frame, exc)])
                continue
            if env.kind in ("ok", "error"):
                self._resolve(env)
            elif env.type == runtime.HELLO:
                self._on_hello(served, prefix[0], env)
            elif env.type in served.inline and len(frame) <= INLINE_MAX_BYTES:  # cheap: no hand-off
                self._answer(env, self._reply_frame(served.service, env), sock, prefix)
            elif served.pool.full():
                if env.kind == "request":
                    err = env.reply_error(
                        ErrorCode.OVERLOADED.value,
                        f"{served.name}: {served.pool.max_backlog} requests queued",
                        sender=self.sender,
                    )
                    self._send_raw(sock, [*prefix, codec.encode(err)])
            else:
                served.pool.submit(partial(self._handle, served.service, env, served.sock, prefix))

    def _on_hello(self, served: Served, rid: bytes, env: Envelope) -> None:
        try:
            hello = runtime.Hello.model_validate(env.body)
        except ValidationError:
            return
        is_new = served.peers.get(hello.name) != rid
        for k in [k for k in served.peers if k == hello.name or k.startswith(hello.name + "#")]:
            del served.peers[k]
        served.peers[hello.name] = rid
        served.peers[f"{hello.name}#{hello.incarnation}"] = rid
        if is_new and served.on_peer is not None:
            served.pool.submit(partial(served.on_peer, hello.name, hello.incarnation))

    def _on_dealer(self, client: Client) -> None:
        for _ in range(512):
            try:
                frame = client.sock.recv_multipart(zmq.NOBLOCK)[-1]
            except zmq.Again:
                return
            try:
                env = codec.decode(frame)
            except BadRequest as exc:
                log.warning("dropped a malformed frame from %s: %s", client.target, exc)
                continue
            if env.kind in ("ok", "error"):
                self._resolve(env)
            elif client.service is None or client.pool is None:
                if env.kind == "request":
                    err = env.reply_error(
                        ErrorCode.NOT_FOUND.value, f"{self.sender} handles no pushes", sender=self.sender
                    )
                    self._send_raw(client.sock, [codec.encode(err)])
            else:
                client.pool.submit(partial(self._handle, client.service, env, client.sock, []))

    def _on_sub(self, sub: Sub) -> None:
        for _ in range(512):
            try:
                parts = sub.sock.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                return
            try:
                env = codec.decode(parts[-1])
            except BadRequest:
                continue
            sub.pool.submit(partial(sub.on_event, env.type, env.body))

    def _bad_request_frame(self, frame: bytes, exc: GeodeError) -> bytes:
        mid, typ = codec.peek_reply_address(frame)
        body = {"code": ErrorCode.BAD_REQUEST.value, "message": exc.message[:2048]}
        try:
            env = Envelope(kind="error", type=typ or ERROR_TYPE, corr=mid, body=body, **{"from": self.sender})
        except ValidationError:
            env = Envelope(kind="error", type=ERROR_TYPE, body=body, **{"from": self.sender})
        return codec.encode(env)

    def _handle(self, service: Service, env: Envelope, sock: Any, prefix: list[bytes]) -> None:
        """Worker thread: validate + run the handler, then hand the reply back to the bus thread."""
        self._answer(env, self._reply_frame(service, env), sock, prefix)

    def _answer(self, env: Envelope, out: bytes | Later | None, sock: Any, prefix: list[bytes]) -> None:
        """Send a reply: at once on the bus thread, else one post to it; a deferred one when it completes."""
        if out is None:
            return
        if isinstance(out, Later):
            self._defer(env, out, sock, prefix)
        elif threading.current_thread() is self._thread:
            self._send_raw(sock, [*prefix, out])
        else:
            self._post(partial(self._send_raw, sock, [*prefix, out]))

    def _defer(self, env: Envelope, later: Later, sock: Any, prefix: list[bytes]) -> None:
        """Track a deferred reply until it completes (send it) or its caller's deadline passed (drop it)."""
        left_s = (env.deadline - now_ms()) / 1000 if env.deadline is not None else DEFERRED_CAP_S
        key = next(self._deferred_seq)
        self._deferred[key] = (time.monotonic() + max(0.0, left_s) + DEFERRED_GRACE_S, later)

        def complete(ok: bool, reply: Any) -> None:
            if self._deferred.pop(key, None) is None:
                return  # dropped: the caller's deadline passed, or the bus stopped
            if ok and reply is not None:
                self._answer(env, self._encode_reply(env, reply), sock, prefix)

        later.then(complete)

    def _sweep_deferred(self, now: float) -> None:
        if now < self._next_sweep:
            return
        self._next_sweep = now + DEFERRED_SWEEP_S
        for key, (deadline, later) in list(self._deferred.items()):
            if deadline < now and self._deferred.pop(key, None) is not None:
                later.drop()
                self.deferred_dropped += 1
                log.warning("bus %s: dropped a deferred reply past its caller's deadline", self.sender)

    def _reply_frame(self, service: Service, env: Envelope) -> bytes | Later | None:
        """Validate + run the handler; the encoded reply (``None`` for a cast, a ``Later`` if deferred)."""
        reply = dispatch_later(service, env, sender=self.sender)
        if reply is None or isinstance(reply, Later):
            return reply
        return self._encode_reply(env, reply)

    def _encode_reply(self, env: Envelope, reply: Envelope) -> bytes:
        try:
            return codec.encode(reply)
        except BadRequest as exc:
            return codec.encode(
                env.reply_error(ErrorCode.INTERNAL.value, f"reply not encodable: {exc}", sender=self.sender)
            )

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
        socks = [s.sock for s in self._served.values()] + [c.sock for c in self._clients.values()]
        socks += [s.sock for s in self._subs.values()] + ([self._pub] if self._pub is not None else [])
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


__all__ = ["Bus", "BusTransport", "PendingReply"]
