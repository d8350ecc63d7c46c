"""Endpoint names → ZeroMQ addresses: ipc (default), inproc (single-process) or tcp (only with CURVE keys)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import zmq

from geode.home import GeodeHome
from geode.protocol.errors import ConfigError

if TYPE_CHECKING:
    from actors.tree.config_sections import BusSection

_NAME = re.compile(r"^[a-z][a-z0-9_.-]{0,47}$")


@dataclass(frozen=True)
class CurveKeys:
    """One z85 keypair shared by the tree: the servers' identity, and the clients' own and server key."""

    public: bytes
    secret: bytes
    allowed: tuple[bytes, ...] = ()  # more client public keys (z85) the servers accept besides ``public``

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

    @classmethod
    def from_config(
        cls, home: GeodeHome, single_process: bool = False, bus: BusSection | None = None
    ) -> Endpoints:
        """``[bus.tcp]`` (name = "tcp://host:port") and ``[bus.curve]`` (public_key, secret_key; z85), from
        ``bus`` or else the home's config (typed: a bad value is a ``ConfigError``)."""
        if bus is None:
            from actors.tree.config_sections import TreeSettings

            bus = TreeSettings.from_home(home).bus
        c = bus.curve
        curve = None
        if c.public_key and c.secret_key:
            allowed = tuple(k.encode() for k in c.allowed_clients)
            curve = CurveKeys(c.public_key.encode(), c.secret_key.encode(), allowed)
        return cls(home, single_process, dict(bus.tcp), curve, bus.workers)

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
        """Bind ``sock`` at ``name`` (CURVE server on tcp; refuses an unauthenticated tcp bind)."""
        addr = self.address(name)
        if addr.startswith("tcp://"):
            if self.curve is None:
                raise ConfigError(
                    f"refusing an unauthenticated tcp bind for {name!r}: "
                    "set [bus.curve] public_key/secret_key"
                )
            sock.zap_domain = b"geode"
            sock.curve_server = True
            sock.curve_publickey = self.curve.public
            sock.curve_secretkey = self.curve.secret
        elif addr.startswith("ipc://"):
            self.home.ensure_run_dir()  # refuses a run dir that is a symlink, not ours or not private
        sock.bind(addr)
        return addr

    def connect(self, sock: zmq.Socket, name: str) -> str:  # type: ignore[type-arg]
        """Connect ``sock`` to ``name`` (CURVE client on tcp)."""
        addr = self.address(name)
        if addr.startswith("tcp://"):
            if self.curve is None:
                raise ConfigError(f"tcp endpoint {name!r} needs [bus.curve] keys")
            sock.curve_serverkey = self.curve.public
            sock.curve_publickey = self.curve.public
            sock.curve_secretkey = self.curve.secret
        elif addr.startswith("ipc://"):
            self.home.ensure_run_dir()  # never talk to sockets in a run dir someone else controls
        sock.connect(addr)
        return addr

    def is_tcp(self, name: str) -> bool:
        return self.address(name).startswith("tcp://")

    def ipc_path(self, name: str) -> str | None:
        """The socket file behind ``name`` (to remove it at shutdown), or None for inproc/tcp."""
        addr = self.address(name)
        return addr[len("ipc://") :] if addr.startswith("ipc://") else None
