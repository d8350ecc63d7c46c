"""Messages every process answers (ping, status) and supervisor lifecycle messages."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from geode.protocol.catalog import message


class Ping(BaseModel):
    """Liveness probe; the reply carries the responder's name and incarnation."""


class Pong(BaseModel):
    name: str
    incarnation: int
    pid: int


class StatusQuery(BaseModel):
    """Ask a process (or the supervisor) for its status."""


class StatusReply(BaseModel):
    name: str
    incarnation: int
    pid: int
    detail: dict[str, Any] = Field(default_factory=dict)


PING = message("runtime.ping", Ping, Pong)
STATUS = message("runtime.status", StatusQuery, StatusReply)


class Ack(BaseModel):
    """An empty acknowledgement."""


class Hello(BaseModel):
    """A peer announces itself to an endpoint (on connect, then periodically) so it can be pushed to."""

    name: str = Field(max_length=64)
    incarnation: int = Field(ge=0)
    pid: int = 0
    trace: bool = False  # it takes ``Envelope.trace`` (a peer of an older release says nothing: not sent)


class Ready(BaseModel):
    """A child tells its supervisor that it finished start-up; only then is the start counted."""

    name: str = Field(max_length=64)
    incarnation: int = Field(ge=0)
    pid: int


class ChildDied(BaseModel):
    """Supervisor → store, lanes: child ``name`` incarnation ``incarnation`` died (clean up after it)."""

    name: str = Field(max_length=64)
    incarnation: int = Field(ge=0)
    reason: str = Field(default="", max_length=512)


HELLO = message("runtime.hello", Hello, None)
READY = message("runtime.ready", Ready, Ack)
CHILD_DIED = message("runtime.child_died", ChildDied, Ack)


class ChildInfo(BaseModel):
    """One child of the tree as ``geode status --json`` shows it."""

    name: str
    pid: int | None = None
    incarnation: int = 0
    state: str  # starting | running | backoff | fatal | stopped
    uptime_s: float = 0.0
    restarts: int = 0
    next_try_s: float | None = None  # backoff: seconds until the next start
    reason: str = ""  # fatal: why (e.g. "11 restarts within 10 s"); cleared by `geode restart NAME`
    rss_bytes: int | None = None  # resident memory (/proc/<pid>/smaps_rollup) when the status was asked
    pss_bytes: int | None = None  # proportional: shared pages divided among the processes mapping them
    # drain-and-swap of a loop worker forked before the zygote had the provider SDKs (actors/tree/swaps.py):
    # early (serving, swapped once they are imported and it is idle), retiring, replacing; "" otherwise
    swap: str = Field(default="", max_length=16)


class ProcessMemory(BaseModel):
    """One process's resident and proportional memory, in bytes."""

    pid: int
    rss_bytes: int
    pss_bytes: int


class TreeMemory(BaseModel):
    """Supervisor, zygote and children summed (RSS counts a shared page once in every process)."""

    rss_bytes: int
    pss_bytes: int
    processes: int


class TreeStatusQuery(BaseModel):
    """Ask the supervisor for the state of every child."""


class TreeStatus(BaseModel):
    pid: int
    incarnation: int
    state: str  # running | stopping
    single_process: bool = False
    children: list[ChildInfo] = Field(default_factory=list)
    rss_bytes: int | None = None  # the supervisor's own
    pss_bytes: int | None = None
    zygote: ProcessMemory | None = None  # the fork server, while one runs
    total: TreeMemory | None = None


class RestartChild(BaseModel):
    """Restart one child (graceful stop, then a fresh incarnation)."""

    name: str = Field(max_length=64)


class StopTree(BaseModel):
    """Stop the whole tree gracefully (children in reverse start order), then the supervisor exits 0."""


TREE_STATUS = message("runtime.tree.status", TreeStatusQuery, TreeStatus)
TREE_RESTART = message("runtime.tree.restart", RestartChild, Ack)
TREE_STOP = message("runtime.tree.stop", StopTree, Ack)


class ReloadTree(BaseModel):
    """`geode reload` (after it validated the file and wrote the tree's copy): tell ``children`` (every
    running child when empty) to apply it; ``stamp`` names this reload in their confirmations."""

    stamp: str = Field(min_length=1, max_length=64)
    children: list[str] = Field(default_factory=list, max_length=256)


class ReloadAsked(BaseModel):
    """The children told (running ones): each confirms with ``runtime.config_applied``."""

    asked: list[str] = Field(default_factory=list)


class ConfigApplied(BaseModel):
    """A child → its supervisor: what it applied of reload ``stamp`` (``error``: it kept its config)."""

    name: str = Field(max_length=128)
    incarnation: int = Field(ge=0)
    stamp: str = Field(max_length=64)
    applied: list[str] = Field(default_factory=list, max_length=64)
    error: str = Field(default="", max_length=2048)


class ReloadQuery(BaseModel):
    """Which children confirmed reload ``stamp`` so far."""

    stamp: str = Field(max_length=64)


class ReloadState(BaseModel):
    """The confirmations of one reload; ``restarted``: children started since it was asked (they read the
    new copy at start, so they count as applied)."""

    confirmed: list[ConfigApplied] = Field(default_factory=list)
    restarted: list[str] = Field(default_factory=list)


TREE_RELOAD = message("runtime.tree.reload", ReloadTree, ReloadAsked)
TREE_RELOAD_STATE = message("runtime.tree.reload_state", ReloadQuery, ReloadState)
CONFIG_APPLIED = message("runtime.config_applied", ConfigApplied, Ack)
