"""The bus's building blocks: socket options, in-flight request handles, per-socket records."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import zmq
from pydantic import BaseModel

from actors.bus.handler_pool import HandlerPool
from actors.bus.reply_reader import ReplyReader
from actors.bus.shared_socket import SharedSocket
from geode.protocol import codec
from geode.protocol.envelope import Envelope
from geode.protocol.errors import GeodeError, RequestTimeout
from geode.protocol.transport import Request, Service

HWM = 10_000
# libzmq drops a connection past WIRE_CAP; frames between the codec's 1 MiB cap and it get bad_request
WIRE_CAP = 2 * codec.MAX_FRAME_BYTES
HEARTBEAT_IVL_MS, HEARTBEAT_TIMEOUT_MS, HEARTBEAT_TTL_MS = 1000, 3000, 5000
RECONNECT_IVL_MS = 100
ERROR_TYPE = "runtime.error"

PeerHandler = Callable[[Request], BaseModel | dict[str, Any] | None]
EventHandler = Callable[[str, dict[str, Any]], None]


class FnService:
    """Adapts a plain ``handler(Request)`` callable to the Service protocol."""

    def __init__(self, fn: PeerHandler) -> None:
        self._fn = fn

    def handle(self, request: Request) -> BaseModel | dict[str, Any] | None:
        return self._fn(request)


class PendingReply:
    """A request in flight (:meth:`Bus.request_nowait`); :meth:`result` waits for the reply envelope.

    A plain class with slots (one per request: a dataclass's generated ``__init__`` and ``__post_init__``
    were two Python frames of every round trip)."""

    __slots__ = ("_done", "_forget", "error", "reader", "reply", "target", "type")
    inline = False  # its set() runs a short continuation (ContinuedReply): the bus thread runs it at once

    def __init__(
        self, target: str = "", type: str = "", *, _forget: Callable[[], None] | None = None
    ) -> None:
        self.target = target
        self.type = type
        self.reply: Envelope | None = None
        self.error: GeodeError | None = None
        self._forget = _forget
        self.reader: ReplyReader | None = None  # sent on a request-only DEALER: its waiters read the reply
        self._done = done = threading.Lock()  # held until the reply is in (one futex)
        done.acquire()

    def set(self) -> None:
        try:
            self._done.release()
        except RuntimeError:  # already set
            pass

    def is_set(self) -> bool:
        return not self._done.locked()

    def result(self, timeout_s: float) -> Envelope:
        reader = self.reader
        got = (
            reader.wait(self, timeout_s)
            if reader is not None
            else self._done.acquire(timeout=max(0.0, timeout_s))
        )
        if not got:
            if self._forget is not None:
                self._forget()
            raise RequestTimeout(f"no reply from {self.target!r} to {self.type} within {timeout_s:g}s")
        try:  # stay "set" for any later result() call (a reply reader's promotion may have released it)
            self._done.release()  # (set() without its call)
        except RuntimeError:
            pass
        if self.error is not None:
            raise self.error
        assert self.reply is not None
        return self.reply


@dataclass
class Served:
    name: str
    sock: zmq.Socket  # type: ignore[type-arg]
    service: Service
    pool: HandlerPool
    on_peer: Callable[[str, int], None] | None = None
    peers: dict[str, bytes] = field(default_factory=dict)  # "loop-1" and "loop-1#3" -> routing id
    trace_peers: set[str] = field(default_factory=set)  # peers whose hello said they take Envelope.trace
    ipc_file: tuple[str, int] | None = None  # (path, inode) to unlink at close if still ours
    inline: frozenset[str] = frozenset()  # the service's ``inline_types``: handled on the bus thread
    batch: bool = False  # a burst's inline replies go as batch frames (peers of this tree: not on tcp)
    wire: SharedSocket = field(init=False)  # ``sock`` as every thread uses it: under its lock

    def __post_init__(self) -> None:
        self.wire = SharedSocket(self.sock)


@dataclass
class Client:
    target: str
    sock: zmq.Socket  # type: ignore[type-arg]
    service: Service | None = None
    pool: HandlerPool | None = None
    next_hello: float = 0.0
    monitor: zmq.Socket | None = None  # type: ignore[type-arg]  # handshakes of a peer client's connection
    on_connected: Callable[[], None] | None = None  # run after the hello of each new handshake
    wire: SharedSocket = field(init=False)  # ``sock`` as every thread uses it: under its lock
    reader: ReplyReader | None = None  # its waiters read it, until connect_peer has the bus thread read it

    def __post_init__(self) -> None:
        self.wire = SharedSocket(self.sock)


@dataclass
class Sub:
    sock: zmq.Socket  # type: ignore[type-arg]
    on_event: EventHandler
    pool: HandlerPool


def make_socket(
    ctx: zmq.Context,  # type: ignore[type-arg]
    kind: int,
    identity: str,
    *,
    heartbeats: bool = False,
) -> zmq.Socket:  # type: ignore[type-arg]
    """A socket with every option set before bind/connect (HWMs, LINGER, caps, heartbeats, ROUTER flags).

    ZMTP heartbeats only where they are needed, on tcp (a dead host sends no FIN): on ipc a dead peer's
    socket closes at once, and libzmq 4.3.5 aborts the whole process (``!_io_error``,
    stream_engine_base.cpp:310) when a heartbeat falls on a connection whose input was stopped and whose
    peer then went away (docs/faults.md, "A known libzmq abort")."""
    s = ctx.socket(kind)
    opts: list[tuple[int, int]] = [(zmq.LINGER, 0), (zmq.SNDHWM, HWM), (zmq.RCVHWM, HWM)]
    opts.append((zmq.MAXMSGSIZE, WIRE_CAP))
    if kind in (zmq.ROUTER, zmq.DEALER):
        opts.append((zmq.RECONNECT_IVL, RECONNECT_IVL_MS))
        if heartbeats:
            opts += [(zmq.HEARTBEAT_IVL, HEARTBEAT_IVL_MS), (zmq.HEARTBEAT_TIMEOUT, HEARTBEAT_TIMEOUT_MS)]
            opts.append((zmq.HEARTBEAT_TTL, HEARTBEAT_TTL_MS))
    if kind == zmq.ROUTER:
        opts += [(zmq.ROUTER_MANDATORY, 1), (zmq.ROUTER_HANDOVER, 1)]
    if kind == zmq.DEALER:
        s.setsockopt(zmq.ROUTING_ID, identity.encode())
    for opt, val in opts:
        s.setsockopt(opt, val)
    return s


def unlink_if_same(path: str, inode: int) -> None:
    """Remove an ipc socket file we bound, unless a newer owner has re-bound the path since."""
    try:
        if os.stat(path).st_ino == inode:
            os.unlink(path)
    except OSError:
        pass
