"""The ``control`` child: the control socket at ``$GEODE_HOME/cli.sock`` for the thin CLI and operators.

A ZeroMQ ROUTER (msgpack envelopes, 1 MiB codec cap; libzmq's MAXMSGSIZE drops anything past 2 MiB) owned
by one socket thread that only reads, hands frames to :class:`geode.control.core.ControlCore` and writes
what it sends back. Requests run on a small thread pool, so the reader never blocks on a turn. The child
also connects to ``lanes`` as a peer named ``control``: turn streams arrive there as ``origin.event``.
"""

from __future__ import annotations

import logging
import os
import queue
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import zmq

from actors.bus import Bus
from geode.control.connection import QUEUE_MAX
from geode.control.core import IDLE_TIMEOUT_S, ControlCore
from geode.home import GeodeHome
from geode.protocol import codec
from geode.protocol import control as c
from geode.protocol.envelope import Envelope
from geode.protocol.errors import GeodeError
from geode.protocol.transport import Request

if TYPE_CHECKING:
    from actors.registry import ChildContext

log = logging.getLogger(__name__)


def geode_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("geode")
    except PackageNotFoundError:
        return "0+unknown"


def builtin_plan() -> Any:
    """The built-in tools as a BoundToolPlan (None when the tools package is unavailable)."""
    try:
        from geode.tools.builtin.catalogue import builtin_specs
        from geode.tools.plan import BoundToolPlan
    except ImportError:
        return None
    return BoundToolPlan.build(builtin_specs(), lineage="builtin")


WIRE_CAP = 2 * codec.MAX_FRAME_BYTES
HWM = 1000
TICK_S = 1.0


class ControlSocket:
    """Owns the ROUTER; ``send`` may be called from any thread (frames go through a queue)."""

    def __init__(self, home: GeodeHome, ctx: zmq.Context | None = None) -> None:  # type: ignore[type-arg]
        self.home = home
        self.path = home.cli_socket
        self._ctx = ctx or zmq.Context.instance()
        self._out: queue.SimpleQueue[tuple[bytes, bytes]] = queue.SimpleQueue()
        self._wake = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.core: ControlCore | None = None
        self._bound = threading.Event()
        self._error: BaseException | None = None

    def start(self, core: ControlCore) -> None:
        self.core = core
        self._thread = threading.Thread(target=self._run, name="control-socket", daemon=True)
        self._thread.start()
        if not self._bound.wait(5.0) or self._error is not None:
            raise RuntimeError(f"control socket did not bind: {self._error}")

    def send(self, conn_id: str, env: Envelope) -> None:
        try:
            frame = codec.encode(env)
        except GeodeError as exc:
            frame = codec.encode(
                Envelope(
                    kind="error",
                    type=env.type,
                    corr=env.corr,
                    body={"code": "internal", "message": f"reply not encodable: {exc}"},
                )
            )
        self._out.put((bytes.fromhex(conn_id), frame))
        os.eventfd_write(self._wake, 1)

    def stop(self) -> None:
        self._stop.set()
        os.eventfd_write(self._wake, 1)
        if self._thread is not None:
            self._thread.join(3.0)
        try:
            self.path.unlink()
        except FileNotFoundError:
            pass

    def _socket(self) -> zmq.Socket:  # type: ignore[type-arg]
        s = self._ctx.socket(zmq.ROUTER)
        for opt, val in (
            (zmq.LINGER, 0),
            (zmq.SNDHWM, HWM),
            (zmq.RCVHWM, HWM),
            (zmq.MAXMSGSIZE, WIRE_CAP),
            (zmq.ROUTER_MANDATORY, 1),
            (zmq.ROUTER_HANDOVER, 1),
        ):
            s.setsockopt(opt, val)
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        os.chmod(self.path.parent, 0o700)
        old = os.umask(0o177)  # the socket file is created 0600
        try:
            if self.path.exists():  # stale: the supervisor's single-instance lock guarantees no live owner
                self.path.unlink()
            s.bind(f"ipc://{self.path}")
        finally:
            os.umask(old)
        os.chmod(self.path, 0o600)
        return s

    def _run(self) -> None:
        try:
            sock = self._socket()
        except BaseException as exc:
            self._error = exc
            self._bound.set()
            return
        self._bound.set()
        poller = zmq.Poller()
        poller.register(sock, zmq.POLLIN)
        poller.register(self._wake, zmq.POLLIN)
        assert self.core is not None
        try:
            while not self._stop.is_set():
                ready = dict(poller.poll(500))
                if self._wake in ready:
                    try:
                        os.eventfd_read(self._wake)
                    except BlockingIOError:
                        pass
                self._flush(sock)
                if sock in ready:
                    self._read(sock)
        finally:
            sock.close(0)

    def _read(self, sock: Any) -> None:
        assert self.core is not None
        for _ in range(256):
            try:
                parts = sock.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                return
            if len(parts) != 2:
                continue  # a routing id plus exactly one frame; anything else is dropped
            try:
                self.core.on_frame(parts[0].hex(), parts[1])
            except Exception:  # on_frame never raises by contract; belt and braces: the reader lives
                log.exception("control frame handling failed")

    def _flush(self, sock: Any) -> None:
        while True:
            try:
                rid, frame = self._out.get_nowait()
            except queue.Empty:
                return
            try:
                sock.send_multipart([rid, frame], zmq.NOBLOCK)
            except zmq.ZMQError:  # gone (EHOSTUNREACH) or its queue is full: that client lost this frame
                if self.core is not None:
                    threading.Thread(target=self.core.disconnect, args=(rid.hex(),), daemon=True).start()


@dataclass
class ControlChild:
    core: ControlCore
    socket: ControlSocket
    bus: Bus
    pool: ThreadPoolExecutor
    owns_bus: bool
    stop_event: threading.Event

    def stop(self) -> None:
        self.stop_event.set()
        self.socket.stop()
        self.pool.shutdown(wait=False, cancel_futures=True)
        if self.owns_bus:
            self.bus.stop()


def start_control(
    home: GeodeHome, *, name: str = "control", incarnation: int = 1, bus: Bus | None = None, workers: int = 8
) -> ControlChild:
    owns = bus is None
    bus = bus or Bus(name, incarnation, home).start()
    pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="control")
    sock = ControlSocket(home)
    cfg = dict(home.load_config().get("control") or {})
    core = ControlCore(
        bus.transport,
        sock.send,
        home=home,
        runner=pool.submit,
        server_version=geode_version(),
        origin=name,
        idle_timeout_s=float(cfg.get("idle_timeout_s", IDLE_TIMEOUT_S)),
        queue_max=int(cfg.get("queue_max", QUEUE_MAX)),
        plan=builtin_plan(),
    )

    def on_lanes_push(r: Request) -> None:
        if r.type == c.ORIGIN_EVENT:
            core.on_origin_event(r.body)  # type: ignore[arg-type]
        return None

    bus.connect_peer("lanes", on_lanes_push, concurrency=1)  # one handler: the stream stays in order
    sock.start(core)
    stop = threading.Event()

    def tick() -> None:
        while not stop.wait(TICK_S):
            core.tick()

    threading.Thread(target=tick, name="control-tick", daemon=True).start()
    return ControlChild(core, sock, bus, pool, owns, stop)


def build(bus: Bus, ctx: ChildContext) -> ControlChild:
    """Registry builder (``actors.registry``): host control on the child's bus."""
    return start_control(ctx.home, name=ctx.name, incarnation=ctx.incarnation, bus=bus)
