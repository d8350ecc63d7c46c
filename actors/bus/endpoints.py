"""Endpoint names → ZeroMQ addresses: ipc (default), inproc (single-process) or tcp (only with CURVE keys);
``[bus] listen`` binds lanes/store/executor on ipc and tcp, a worker host connects to main's tcp ports."""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import zmq

from geode.home import GeodeHome
from geode.protocol.errors import ConfigError

if TYPE_CHECKING:
    from actors.bus.settings import BusSection

_NAME = re.compile(r"^[a-z][a-z0-9_.-]{0,47}$")


@dataclass(frozen=True)
class CurveKeys:
    """One z85 keypair shared by the tree: the servers' identity, and the clients' own and server key."""

    public: bytes
    secret: bytes
    allowed: tuple[bytes, ...] = ()  # more client public keys (z85) the servers accept besides ``public``
    server: bytes = b""  # the server's public key a client expects (a worker host: main's); default public

    def accepts(self, client_key_z85: bytes) -> bool:
        return client_key_z85 == self.public or client_key_z85 in self.allowed

    @classmethod
    def generate(cls) -> CurveKeys:
        pub, sec = zmq.curve_keypair()
        return cls(pub, sec)


@dataclass(frozen=True)
class Endpoints:
    """Resolves named endpoints for one GEODE home; ``tcp`` maps a name to ``tcp://host:port``."""

    home: GeodeHome
    single_process: bool = False
    tcp: dict[str, str] = field(default_factory=dict)
    curve: CurveKeys | None = None
    workers: int = 4  # default handler threads per served endpoint (``[bus] workers``)
    listen: dict[str, str] = field(default_factory=dict)  # names bound on tcp too (``[bus] listen``)
    remote: dict[str, str] = field(default_factory=dict)  # names a worker host connects to on main (tcp)

    @classmethod
    def from_config(
        cls, home: GeodeHome, single_process: bool = False, bus: BusSection | None = None
    ) -> Endpoints:
        """``[bus.tcp]`` (name = "tcp://host:port"), ``[bus] listen``, ``[bus.curve]`` and the keys folder
        (``geode keys init``; it wins over inline public_key/secret_key), from ``bus`` or else the home's
        config (typed: a bad value is a ``ConfigError``); on a worker host the role in the environment."""
        from actors.bus import host_keys
        from actors.tree.worker_role import WorkerRole, service_ports

        if bus is None:
            from actors.tree.config_sections import TreeSettings
            from geode.config_source import ConfigSource

            bus = ConfigSource(home, TreeSettings.from_raw).snapshot.bus
        c = bus.curve
        allowed = tuple(k.encode() for k in (*c.allowed_clients, *c.authorized_keys))
        pair = host_keys.load(home)
        curve = None
        if pair is not None:
            curve = CurveKeys(pair[0].encode(), pair[1].encode(), allowed)
        elif c.public_key and c.secret_key:
            curve = CurveKeys(c.public_key.encode(), c.secret_key.encode(), allowed)
        listen = service_ports(bus.listen, "[bus] listen") if bus.listen and not single_process else {}
        role = None if single_process else WorkerRole.from_env()
        remote = role.ports() if role is not None else {}
        if role is not None and curve is not None:
            curve = CurveKeys(curve.public, curve.secret, curve.allowed, role.server_key.encode())
        return cls(home, single_process, dict(bus.tcp), curve, bus.workers, listen, remote)

    def address(self, name: str) -> str:
        if not _NAME.match(name):
            raise ConfigError(f"invalid endpoint name {name!r}")
        if name in self.tcp and not self.single_process:
            addr = self.tcp[name]
            if not addr.startswith("tcp://"):
                raise ConfigError(f"[bus.tcp] {name} must be a tcp:// address, got {addr!r}")
            return addr
        if self.single_process:
            return f"inproc://geode-{name}"
        return self.home.ipc_endpoint(name)

    def bind(self, sock: zmq.Socket, name: str) -> str:  # type: ignore[type-arg]
        """Bind ``sock`` at ``name`` (CURVE server on tcp; refuses an unauthenticated tcp bind). A name in
        ``listen`` binds its ipc address first (NULL security: local children), then the CURVE options,
        then tcp: libzmq copies a socket's options into each listener at bind time."""
        addr = self.address(name)
        if addr.startswith("tcp://"):
            self._curve_server(sock, name, "set [bus.curve] public_key/secret_key or run geode keys init")
        elif addr.startswith("ipc://"):
            self.home.ensure_run_dir()  # refuses a run dir that is a symlink, not ours or not private
        extra = self.listen.get(name) if not self.single_process else None
        if extra is not None and self.curve is None:
            raise ConfigError(f"[bus] listen: {name!r} needs this host's key pair: run geode keys init")
        if addr.startswith("inproc://"):
            bind_inproc(sock, addr)
        else:
            sock.bind(addr)
        if extra is not None:  # the ipc listener above keeps NULL security; this one is a CURVE server
            self._curve_server(sock, name, "")
            sock.bind(extra)
        return addr

    def _curve_server(self, sock: zmq.Socket, name: str, hint: str) -> None:  # type: ignore[type-arg]
        if self.curve is None:
            raise ConfigError(f"refusing an unauthenticated tcp bind for {name!r}: {hint}")
        sock.zap_domain = b"geode"
        sock.curve_server = True
        sock.curve_publickey = self.curve.public
        sock.curve_secretkey = self.curve.secret

    def connect(self, sock: zmq.Socket, name: str) -> str:  # type: ignore[type-arg]
        """Connect ``sock`` to ``name`` (CURVE client on tcp; a worker host's lanes/store/executor: main)."""
        addr = self.connect_address(name)
        if addr.startswith("tcp://"):
            if self.curve is None:
                hint = "run geode keys init" if name in self.remote else "needs [bus.curve] keys"
                raise ConfigError(f"tcp endpoint {name!r}: {hint}")
            sock.curve_serverkey = self.curve.server or self.curve.public
            sock.curve_publickey = self.curve.public
            sock.curve_secretkey = self.curve.secret
        elif addr.startswith("ipc://"):
            self.home.ensure_run_dir()  # never talk to sockets in a run dir someone else controls
        sock.connect(addr)
        return addr

    def connect_address(self, name: str) -> str:
        """Where a client of ``name`` connects: main's tcp port on a worker host, else :meth:`address`."""
        if name in self.remote and not self.single_process:
            return self.remote[name]
        return self.address(name)

    def is_tcp(self, name: str) -> bool:
        """Served or reached over tcp (ZMTP heartbeats; a ZAP handler on the serving side)."""
        if self.single_process:
            return False
        return name in self.listen or self.connect_address(name).startswith("tcp://")

    def ipc_path(self, name: str) -> str | None:
        """The socket file behind ``name`` (to remove it at shutdown), or None for inproc/tcp."""
        addr = self.address(name)
        return addr[len("ipc://") :] if addr.startswith("ipc://") else None


INPROC_REBIND_S = 2.0  # the longest a bind waits for the name's last socket to be unbound


def bind_inproc(sock: zmq.Socket, addr: str) -> None:  # type: ignore[type-arg]
    """Bind ``sock`` at an ``inproc://`` name, waiting (bounded) for a socket closed there a moment ago:
    libzmq unbinds a closed socket's inproc name on its reaper thread, after ``close`` returned, so a bus
    started right after another one at the same name stopped (single-process mode, tests) could see
    "Address already in use" for a few milliseconds (a clean-clone CI run did; a plain bind right after a
    close fails about 7 times in 1,000 here). A name still held past ``INPROC_REBIND_S`` is a real clash
    and raises as before."""
    deadline = time.monotonic() + INPROC_REBIND_S
    while True:
        try:
            sock.bind(addr)
            return
        except zmq.ZMQError as exc:
            if exc.errno != zmq.EADDRINUSE or time.monotonic() >= deadline:
                raise
        time.sleep(0.005)
