"""A worker host's role (``geode serve --role worker``): which children it runs and how they reach main.

``serve`` puts it in the supervisor's environment, so every child (forked by the zygote) reads the same
typed :class:`WorkerRole`; on the main host there is none."""

from __future__ import annotations

import os
import re
import socket
from collections.abc import Mapping

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from geode.protocol.errors import ConfigError

ROLE_ENV, HOST_ENV, CONNECT_ENV = "GEODE_ROLE", "GEODE_HOST", "GEODE_CONNECT"
SERVER_KEY_ENV, ROOTS_ENV, CHILDREN_ENV = "GEODE_SERVER_KEY", "GEODE_ROOTS", "GEODE_CHILDREN"
KINDS = ("loop", "executor")
REMOTE_NAMES = ("lanes", "store", "executor")  # main's port, port+1, port+2
_TCP = re.compile(r"^tcp://(?P<host>\[[0-9a-fA-F:.]+\]|[A-Za-z0-9_.-]+):(?P<port>\d{1,5})$")
_HOST = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,31}$")


def split_tcp(addr: str, what: str = "address") -> tuple[str, int]:
    """``tcp://HOST:PORT`` → (HOST, PORT); a one-line ConfigError otherwise (room for port+2 too)."""
    m = _TCP.match(addr)
    if m is None or not 0 < int(m["port"]) <= 65533:
        raise ConfigError(f"{what} must look like tcp://HOST:PORT (port 1..65533), got {addr!r}")
    return m["host"], int(m["port"])


def service_ports(base: str, what: str = "address") -> dict[str, str]:
    """The three tcp addresses behind a base address: lanes = port, store = port+1, executor = port+2."""
    host, port = split_tcp(base, what)
    return {name: f"tcp://{host}:{port + i}" for i, name in enumerate(REMOTE_NAMES)}


class WorkerRole(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    host: str
    connect: str
    server_key: str = Field(min_length=40, max_length=40)
    children: tuple[str, ...] = ("loop",)
    roots: tuple[str, ...] = ()

    @field_validator("host")
    @classmethod
    def _host(cls, v: str) -> str:
        if not _HOST.match(v):
            raise ValueError(f"host name {v!r}: letters, digits, '.', '_' or '-' (at most 32)")
        return v

    @field_validator("connect")
    @classmethod
    def _connect(cls, v: str) -> str:
        split_tcp(v, "--connect")
        return v

    @field_validator("children")
    @classmethod
    def _children(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        bad = [k for k in v if k not in KINDS]
        if bad or not v:
            raise ValueError(f"--children takes loop and/or executor, got {','.join(v) or 'nothing'}")
        return tuple(dict.fromkeys(v))

    @field_validator("roots")
    @classmethod
    def _roots(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        bad = [r for r in v if not r.startswith("/")]
        if bad:
            raise ValueError(f"--roots must be absolute paths, got {bad[0]!r}")
        return v

    def ports(self) -> dict[str, str]:
        """lanes / store / executor on main."""
        return service_ports(self.connect, "--connect")

    def address_towards_main(self) -> str:
        """This host's address on the route to main (shown by main's ``geode status``); "" if unknown. A UDP
        connect only picks the route: nothing is sent."""
        host, port = split_tcp(self.connect)
        try:
            family = socket.AF_INET6 if host.startswith("[") else socket.AF_INET
            with socket.socket(family, socket.SOCK_DGRAM) as s:
                s.connect((host.strip("[]"), port))
                return str(s.getsockname()[0])
        except OSError:
            return ""

    def qualified(self, name: str) -> str:
        """``w1/loop-1``: how a child of this host is named on main (lanes, status, a message's ``from``)."""
        return f"{self.host}/{name}"

    def env(self) -> dict[str, str]:
        return {
            ROLE_ENV: "worker",
            HOST_ENV: self.host,
            CONNECT_ENV: self.connect,
            SERVER_KEY_ENV: self.server_key,
            CHILDREN_ENV: ",".join(self.children),
            ROOTS_ENV: ",".join(self.roots),
        }

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> WorkerRole | None:
        env = os.environ if environ is None else environ
        if env.get(ROLE_ENV) != "worker":
            return None
        return cls.parse(
            host=env.get(HOST_ENV) or default_host(),
            connect=env.get(CONNECT_ENV, ""),
            server_key=env.get(SERVER_KEY_ENV, ""),
            children=_items(env.get(CHILDREN_ENV, "loop")),
            roots=_items(env.get(ROOTS_ENV, "")),
        )

    @classmethod
    def parse(cls, **fields: object) -> WorkerRole:
        """Validated, or a one-line ConfigError naming the first problem."""
        try:
            return cls.model_validate(fields)
        except ValidationError as exc:
            err = exc.errors()[0]
            where = ".".join(str(x) for x in err["loc"]) or "worker role"
            raise ConfigError(f"--role worker: {where}: {err['msg'].removeprefix('Value error, ')}") from None


def _items(raw: str) -> tuple[str, ...]:
    return tuple(x.strip() for x in raw.split(",") if x.strip())


def default_host() -> str:
    """The hostname's first label, cut to a valid host name."""
    name = re.sub(r"[^A-Za-z0-9_.-]", "-", socket.gethostname().split(".")[0])[:32] or "host"
    return name if name[0].isalnum() else f"h{name[:31]}"


def bus_name(child: str, role: WorkerRole | None = None) -> str:
    """The bus name of a child process: host-qualified on a worker host, the plain name on main."""
    role = role if role is not None else WorkerRole.from_env()
    return role.qualified(child) if role is not None else child
