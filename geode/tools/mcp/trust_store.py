"""What `geode trust` bound each project to: the directory's identity (device, inode, owner uid) and the MCP
servers it approved (name → fingerprint of what runs), kept 0600 in ``$GEODE_HOME/trust.json``."""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from geode.private_dir import write_private
from geode.protocol.errors import ConfigError
from geode.tools.mcp.config import McpServerConfig

STORE_NAME = "trust.json"


class Identity(BaseModel):
    """A directory as the kernel knows it: a re-created or re-cloned directory at the same path differs."""

    model_config = ConfigDict(frozen=True)
    dev: int
    ino: int
    uid: int

    @classmethod
    def of(cls, st: os.stat_result) -> Identity:
        return cls(dev=st.st_dev, ino=st.st_ino, uid=st.st_uid)

    def text(self) -> str:
        return f"device {self.dev}, inode {self.ino}, owner uid {self.uid}"


class Binding(BaseModel):
    """One trusted project: the directory it was at `geode trust` time and its approved servers."""

    identity: Identity
    servers: dict[str, str] = Field(default_factory=dict)  # name → fingerprint(server)


class TrustStore(BaseModel):
    version: Literal[1] = 1
    projects: dict[str, Binding] = Field(default_factory=dict)  # the path as in [trust] projects


def store_path(home_root: Path) -> Path:
    return home_root / STORE_NAME


def fingerprint(server: McpServerConfig) -> str:
    """What an approval covers: transport, command, args, cwd, url and the env/header names (their values
    hold secrets and are not kept; a file another uid can write is refused anyway)."""
    what = {
        "transport": server.transport,
        "command": server.command,
        "args": server.args,
        "cwd": server.cwd,
        "url": server.url,
        "env": sorted(server.env),
        "headers": sorted(server.headers),
    }
    return hashlib.sha256(json.dumps(what, sort_keys=True).encode()).hexdigest()[:32]


def load_store(home_root: Path) -> TrustStore:
    """The bindings (an absent file: none); a damaged file is a ``ConfigError`` naming it."""
    path = store_path(home_root)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return TrustStore()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from None
    try:
        return TrustStore.model_validate_json(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ()))
        raise ConfigError(
            f"{path}: not a trust record ({where + ': ' if where else ''}{first.get('msg', '')}); "
            "no project is trusted until `geode trust PATH` rewrites it"
        ) from None


@contextmanager
def edit_store(home_root: Path) -> Iterator[TrustStore]:
    """Read-modify-write under a lock on the home directory; the change is written atomically at exit."""
    home_root.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(home_root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            store = load_store(home_root)
        except ConfigError:
            store = TrustStore()  # a damaged record is replaced by what this command trusts
        yield store
        write_private(store_path(home_root), (store.model_dump_json(indent=1) + "\n").encode())
    finally:
        os.close(fd)
