"""The ``control`` child: the control socket at ``$GEODE_HOME/cli.sock`` for the thin CLI and operators.

A ZeroMQ ROUTER (msgpack envelopes, 1 MiB codec cap; libzmq's MAXMSGSIZE drops anything past 2 MiB) read by
one socket thread that hands frames to :class:`geode.control.core.ControlCore`; a thread that sends to a
client (the bus thread relaying a turn's events, a request's pool thread with its reply) sends on the socket
itself under its lock (:class:`actors.bus.shared_socket.SharedSocket`: the socket thread polls its
``ZMQ_FD``), so an event to a client wakes no other thread. Requests run on a small thread pool, so the reader
never blocks on a turn. The child also connects to ``lanes`` as a peer named ``control``: turn streams arrive
there as ``origin.event``.

Only the daemon's own user connects: the socket is 0600 in a 0700 directory we own (checked at bind, else
the child refuses to start), and a ZAP handler on the socket's own context admits a peer only when the
kernel's credentials of its ipc connection (libzmq's SO_PEERCRED address ``:uid:gid:pid``) carry our uid
and its pid is no process of a run_bash call (``bash_peers``: an approved command never drives the daemon).
"""

from __future__ import annotations

import logging
import os
import stat
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import zmq

from actors.bus import Bus
from actors.bus.continued import ContinuedCalls
from actors.bus.shared_socket import SharedSocket
from actors.bus.zap import ZapResponder
from geode.config_schema import GeodeConfig
from geode.config_source import ConfigSource
from geode.control.core import ControlCore
from geode.control.session_end import SessionEndHooks
from geode.control.settings import ControlSection
from geode.home import GeodeHome
from geode.protocol import codec, lifecycle
from geode.protocol import lanes as lanes_msg
from geode.protocol.control import CLI_EVENT, CLI_EVENTS
from geode.protocol.dispatch import Dispatch
from geode.protocol.envelope import Envelope, new_id
from geode.protocol.errors import GeodeError
from geode.protocol.transport import Request
from geode.sessions.factory import SessionSpec, create_session
from geode.tools.builtin.bash_peers import run_bash_membership
from geode.tools.catalogue_plans import CataloguePlans
from geode.work_tally import HANDOFF_POOL
from geode.work_tally import handoff as tally

if TYPE_CHECKING:
    from actors.tree.registry import ChildContext

log = logging.getLogger(__name__)


def geode_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("geode")
    except PackageNotFoundError:
        return "0+unknown"


WIRE_CAP = 2 * codec.MAX_FRAME_BYTES
HWM = 1000
TICK_S = 1.0
SWEEP_S = 0.1  # the continued calls' sweep while an attach waits for lanes (its deadline is 1 s)
ZAP_DOMAIN = b"geode-control"


def peer_uid(address: bytes) -> int | None:
    """The uid libzmq appends to an ipc peer's address (``<addr>:<uid>:<gid>:<pid>``); None if absent."""
    parts = address.decode(errors="replace").rsplit(":", 3)
    if len(parts) != 4 or not parts[1].isdigit():
        return None
    return int(parts[1])


def peer_pid(address: bytes) -> int | None:
    """The pid in the same address (0: the peer is in no descendant of our PID namespace)."""
    parts = address.decode(errors="replace").rsplit(":", 3)
    return int(parts[3]) if len(parts) == 4 and parts[3].isdigit() else None


class PeerGate(ZapResponder):
    """ZAP (RFC 27) for the control socket: a connecting peer must run as the daemon's uid, outside every
    run_bash call."""

    refusal = b"wrong user"

    def __init__(self, ctx: zmq.Context, uid: int | None = None) -> None:  # type: ignore[type-arg]
        self.uid = os.getuid() if uid is None else uid
        self.rejected = 0
        self.refused_calls = 0  # peers of our uid inside a run_bash call
        self._logged: set[int | None] = set()
        super().__init__(ctx)

    def decide(self, frames: list[bytes]) -> bytes | None:
        address = frames[3] if len(frames) > 3 else b""
        uid, pid = peer_uid(address), peer_pid(address)
        if uid is not None and uid == self.uid:
            why = run_bash_membership(pid) if pid is not None else "no pid in its credentials"
            if why is None:
                return str(uid).encode()
            self.refused_calls += 1
            if pid not in self._logged:  # once per peer process: a reconnecting client does not flood the log
                self._logged = self._logged if len(self._logged) < 1000 else set()
                self._logged.add(pid)
                log.warning("control socket: refused pid %s (uid %d): %s", pid, uid, why)
            return None
        self.rejected += 1
        if self.rejected == 1 or self.rejected % 100 == 0:  # a retrying peer does not flood the log
            log.warning("control socket: refused uid %s (only uid %d connects)", uid, self.uid)
        return None


def check_private(path: Path, mode: int, *, directory: bool) -> None:
    """Refuse a socket path (or its directory) that is a symlink, not ours, or open to others."""
    st = os.lstat(path)
    kind_ok = stat.S_ISDIR(st.st_mode) if directory else stat.S_ISSOCK(st.st_mode)
    if not kind_ok or st.st_uid != os.getuid() or stat.S_IMODE(st.st_mode) & ~mode:
        raise PermissionError(
            f"{path} must be a {'directory' if directory else 'socket'} owned by uid {os.getuid()} with mode "
            f"{mode:o} at most (found uid {st.st_uid}, mode {stat.S_IMODE(st.st_mode):o}); refusing to serve"
        )


class ControlSocket:
    """Owns the ROUTER; ``send`` may be called from any thread (it sends itself, under the socket's lock)."""

    def __init__(self, home: GeodeHome, ctx: zmq.Context | None = None) -> None:  # type: ignore[type-arg]
        self.home = home
        self.path = home.cli_socket
        self._ctx = ctx or zmq.Context()  # its own context: its ZAP handler answers for this socket only
        self._own_ctx = ctx is None
        self.gate: PeerGate | None = None
        self._wire: SharedSocket | None = None  # the bound ROUTER, once the socket thread made it
        self._wake = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)  # stop, or a client frame seen by a send
        self._idle = False  # the socket thread is (about to be) asleep in poll
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.core: ControlCore | None = None
        self._bound = threading.Event()
        self._error: BaseException | None = None
        self.dropped_multipart = 0

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
            if env.type == CLI_EVENTS and len(env.body.get("events", ())) > 1:  # together over the cap
                for ev in env.body["events"]:  # (a done with a long answer): one ``cli.event`` each
                    self.send(conn_id, env.model_copy(update={"id": new_id(), "type": CLI_EVENT, "body": ev}))
                return
            frame = codec.encode(
                Envelope(
                    kind="error",
                    type=env.type,
                    corr=env.corr,
                    body={"code": "internal", "message": f"reply not encodable: {exc}"},
                )
            )
        wire = self._wire
        if wire is None:  # not bound yet, or stopped: nobody to send to
            return
        try:
            unread = wire.send([bytes.fromhex(conn_id), frame])
        except zmq.ZMQError:  # gone (EHOSTUNREACH) or its queue is full: that client lost this frame
            if not wire.closed and self.core is not None:
                threading.Thread(target=self.core.disconnect, args=(conn_id,), daemon=True).start()
            return
        if unread:  # the send took the ZMQ_FD edge of a client frame that arrived meanwhile: wake the reader
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
        if self._own_ctx and (self._thread is None or not self._thread.is_alive()):
            self._ctx.term()  # every socket of this context is closed by now

    def _socket(self) -> zmq.Socket:  # type: ignore[type-arg]
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        parent = self.path.parent.resolve()  # a home that is itself a symlink is the user's choice
        if os.lstat(parent).st_uid == os.getuid():
            os.chmod(parent, 0o700, follow_symlinks=False)
        check_private(parent, 0o700, directory=True)
        s = self._ctx.socket(zmq.ROUTER)
        try:
            self._bind(s)
        except BaseException:
            s.close(0)
            raise
        return s

    def _bind(self, s: Any) -> None:
        for opt, val in (
            (zmq.LINGER, 0),
            (zmq.SNDHWM, HWM),
            (zmq.RCVHWM, HWM),
            (zmq.MAXMSGSIZE, WIRE_CAP),
            (zmq.ROUTER_MANDATORY, 1),
            (zmq.ROUTER_HANDOVER, 1),
        ):
            s.setsockopt(opt, val)
        s.setsockopt(zmq.ZAP_DOMAIN, ZAP_DOMAIN)  # every connection goes through PeerGate
        old = os.umask(0o177)  # the socket file is created 0600
        try:
            if self.path.exists():  # stale: the supervisor's single-instance lock guarantees no live owner
                self.path.unlink()
            s.bind(f"ipc://{self.path}")
        finally:
            os.umask(old)
        os.chmod(self.path, 0o600)
        check_private(self.path, 0o600, directory=False)

    def _run(self) -> None:
        try:
            self.gate = PeerGate(self._ctx)
            sock = self._socket()
        except BaseException as exc:
            self._error = exc
            if self.gate is not None:
                self.gate.close()
            if self._own_ctx:
                self._ctx.term()
            self._bound.set()
            return
        wire = self._wire = SharedSocket(sock)
        self._bound.set()
        poller = zmq.Poller()
        poller.register(wire.fd, zmq.POLLIN)  # edge-triggered: each pass reads until nothing is left
        poller.register(self._wake, zmq.POLLIN)
        poller.register(self.gate.sock, zmq.POLLIN)
        assert self.core is not None
        more = False
        try:
            while not self._stop.is_set():
                self._idle = True
                ready = dict(poller.poll(0 if more else 500))
                self._idle = False
                if self._wake in ready:
                    try:
                        os.eventfd_read(self._wake)
                    except BlockingIOError:
                        pass
                if self.gate.sock in ready:
                    self.gate.handle()
                more = self._read(wire)
        finally:
            wire.close()
            self.gate.close()

    def _read(self, wire: SharedSocket) -> bool:
        """Take the client frames waiting; True when it stopped at its bound with more perhaps waiting."""
        assert self.core is not None
        for _ in range(256):
            parts = wire.recv()
            if parts is None:
                return False
            if len(parts) != 2:  # a routing id plus exactly one frame; anything else is dropped
                self.dropped_multipart += 1
                if self.dropped_multipart == 1 or self.dropped_multipart % 100 == 0:  # a flood is not a log
                    log.warning(
                        "control socket: dropped a %d-part message (one frame per message); %d so far",
                        len(parts) - 1,
                        self.dropped_multipart,
                    )
                continue
            try:
                self.core.on_frame(parts[0].hex(), parts[1])
            except Exception:  # on_frame never raises by contract; belt and braces: the reader lives
                log.exception("control frame handling failed")
        return True


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
    home: GeodeHome,
    *,
    name: str = "control",
    incarnation: int = 1,
    bus: Bus | None = None,
    workers: int = 8,
    settings: ControlSection | None = None,
    source: ConfigSource[Any] | None = None,
) -> ControlChild:
    """Host control; its sessions are composed on ``source``'s current snapshot (the child's: replaced only
    by ``geode reload``), never by reading the file per session; standalone (None) the file, read once."""
    source = source or ConfigSource(home, GeodeConfig.from_raw)
    owns = bus is None
    bus = bus or Bus(name, incarnation, home).start()
    pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="control")
    sock = ControlSocket(home)
    cfg = settings or source.snapshot.control

    def session_factory(*args: Any, **kw: Any) -> SessionSpec:
        return create_session(*args, config=source.snapshot, **kw)

    # the executor's catalogue, asked at start and again in the background when the executor (re)starts: a
    # handshake never waits for it (the built-ins until the first answer; the worker notes a changed plan)
    calls = ContinuedCalls(bus)  # a prompt's lanes.submit: its reply taken by the bus thread (no pool wait)
    plans = CataloguePlans(bus.transport, wait=False, who=name)
    plans.prefetch()
    core = ControlCore(
        bus.transport,
        sock.send,
        home=home,
        runner=lambda job: (tally(HANDOFF_POOL), pool.submit(job)),  # a pool job is a hand-off: counted
        server_version=geode_version(),
        origin=name,
        idle_timeout_s=cfg.idle_timeout_s,
        handshake_deadline_s=cfg.handshake_deadline_s,
        queue_max=cfg.queue_max,
        plans=plans,
        session_factory=session_factory,
        on_session_end=SessionEndHooks(lambda: source.snapshot, home.root),
        calls=calls,
    )

    def on_origin_event(b: lanes_msg.StreamEvent, r: Request) -> None:
        core.on_origin_event(b)

    def on_origin_events(b: lanes_msg.StreamEvents, r: Request) -> None:
        core.on_origin_events(b.events)  # to a client that takes them: one cli.events frame

    def on_lifecycle(topic: str, event: lifecycle.ChildEvent) -> None:
        plans.on_lifecycle(topic, event)
        if topic == lifecycle.CHILD_READY and event.name == core.lanes:  # a new lanes: clients catch up
            pool.submit(core.lanes_restarted, event.incarnation)

    bus.subscribe("supervisor", lifecycle.on_child_events(on_lifecycle))
    # run on the bus thread as each push arrives (no hand-off; never blocks: it only queues frames for the
    # control socket), so the stream also stays in order; ``origin.events``: several in one frame, in order
    events, batched = lanes_msg.ORIGIN_EVENT, lanes_msg.ORIGIN_EVENTS
    routes = {events: on_origin_event, batched: on_origin_events}
    lanes_push = Dispatch("control (lanes peer)", routes, inline=[events, batched])
    bus.connect_peer("lanes", lanes_push, concurrency=1)
    sock.start(core)
    stop = threading.Event()

    def tick() -> None:
        last = time.monotonic()
        # while an attach waits for lanes' replay (1 s deadline, then the store), its deadline is swept every
        # SWEEP_S (not a whole TICK_S late): the client waits 2 s for the whole attach
        while not stop.wait(SWEEP_S if core.replaying() else TICK_S):
            calls.sweep()  # a submit past its deadline: RequestTimeout (retried as a waiting one was)
            if (now := time.monotonic()) - last >= TICK_S * 0.9:
                last = now
                core.tick()

    threading.Thread(target=tick, name="control-tick", daemon=True).start()
    return ControlChild(core, sock, bus, pool, owns, stop)


def build(bus: Bus, ctx: ChildContext) -> ControlChild:
    """Registry builder (``actors.tree.registry``): host control on the child's bus."""
    return start_control(
        ctx.home,
        name=ctx.name,
        incarnation=ctx.incarnation,
        bus=bus,
        settings=ctx.settings.control,
        source=ctx.source,
    )
