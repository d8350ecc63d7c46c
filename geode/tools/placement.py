"""Where a tool call runs: on the remote executor whose declared roots hold the session's workspace (the
longest root wins; a lost one's roots answer "down" until it registers again), else on the local executor."""

from __future__ import annotations

import posixpath
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Literal

LIVENESS_S = 3.0  # three missed 1 s heartbeats (as lanes does for loop workers)
HEARTBEAT_S = 1.0


def norm_root(path: str) -> str:
    """A lexical, absolute form of ``path`` (no symlinks resolved: the path may not exist on this host)."""
    if not path or not path.startswith("/"):
        raise ValueError(f"an executor root must be an absolute path, got {path!r}")
    return posixpath.normpath(path).replace("//", "/")


def is_under(path: str, root: str) -> bool:
    """``path`` is ``root`` or lies below it (both normalised; ``/a/bc`` is not under ``/a/b``)."""
    return path == root or root == "/" or path.startswith(root + "/")


@dataclass(frozen=True)
class RemoteExecutor:
    """A registered executor on another host; ``peer`` is the bus address its requests are sent to."""

    host: str
    name: str
    incarnation: int
    roots: tuple[str, ...]
    peer: str
    address: str = ""
    last_seen: float = 0.0  # monotonic
    up: bool = True
    in_flight: int = 0

    @property
    def owner_name(self) -> str:
        """The receipt owner's name (``HOST/executor``); receipts are owned by ``owner_name#incarnation``."""
        return f"{self.host}/{self.name}"

    @property
    def key(self) -> str:
        return self.owner_name


@dataclass(frozen=True)
class Route:
    kind: Literal["local", "remote", "down"]
    remote: RemoteExecutor | None = None
    root: str = ""


@dataclass
class Placement:
    """The remote executors this host routes to. Thread-safe; the clock is passed in (monotonic seconds)."""

    liveness_s: float = LIVENESS_S
    _by_key: dict[str, RemoteExecutor] = field(default_factory=dict)
    _mu: threading.Lock = field(default_factory=threading.Lock)

    def register(
        self,
        *,
        host: str,
        name: str,
        incarnation: int,
        roots: Iterable[str],
        peer: str,
        now: float,
        address: str = "",
    ) -> RemoteExecutor | None:
        """Record a ready executor. Returns the previous, still-up incarnation it replaces (now dead: its
        admitted receipts must become uncertain), or None. The same incarnation again only refreshes it."""
        new = RemoteExecutor(
            host, name, incarnation, tuple(sorted({norm_root(r) for r in roots})), peer, address, now
        )
        with self._mu:
            old = self._by_key.get(new.key)
            if old is not None and old.up and old.incarnation == incarnation and old.peer == peer:
                self._by_key[new.key] = replace(old, roots=new.roots, last_seen=now, address=address)
                return None
            self._by_key[new.key] = new
            return old if old is not None and old.up else None

    def restore(self, remembered: Iterable[RemoteExecutor], now: float) -> None:
        """Seed the table after this process restarted: a remembered live executor counts as just heard (its
        heartbeats carry on, or it is lost after the liveness window), a lost one stays down."""
        with self._mu:
            for rx in remembered:
                self._by_key.setdefault(rx.key, replace(rx, last_seen=now, in_flight=0))

    def heartbeat(self, host: str, name: str, incarnation: int, now: float) -> bool:
        """A heartbeat from a registered, live incarnation refreshes it; False tells the sender to register
        (again): this host forgot it (restarted) or already declared it lost."""
        key = f"{host}/{name}"
        with self._mu:
            rx = self._by_key.get(key)
            if rx is None or not rx.up or rx.incarnation != incarnation:
                return False
            self._by_key[key] = replace(rx, last_seen=now)
            return True

    def expire(self, now: float) -> list[RemoteExecutor]:
        """Mark the executors silent for longer than the liveness window down; returns them (newly lost)."""
        lost: list[RemoteExecutor] = []
        with self._mu:
            for key, rx in list(self._by_key.items()):
                if rx.up and now - rx.last_seen > self.liveness_s:
                    self._by_key[key] = replace(rx, up=False, in_flight=0)
                    lost.append(rx)
        return lost

    def route(self, workspace: str) -> Route:
        """The executor for a session whose workspace is ``workspace``: the longest declared root holding it
        (a lost executor's roots route to ``down``), else local. An empty or relative workspace is local."""
        if not workspace or not workspace.startswith("/") or not self._by_key:  # no remote executor: local
            return Route("local")
        ws = norm_root(workspace)
        best: tuple[int, RemoteExecutor, str] | None = None
        with self._mu:
            for rx in self._by_key.values():
                for root in rx.roots:
                    if is_under(ws, root) and (best is None or len(root) > best[0]):
                        best = (len(root), rx, root)
        if best is None:
            return Route("local")
        _, rx, root = best
        return Route("remote" if rx.up else "down", rx, root)

    def started(self, rx: RemoteExecutor) -> None:
        self._count(rx, +1)

    def finished(self, rx: RemoteExecutor) -> None:
        self._count(rx, -1)

    def _count(self, rx: RemoteExecutor, delta: int) -> None:
        with self._mu:
            cur = self._by_key.get(rx.key)
            if cur is not None and cur.incarnation == rx.incarnation and cur.up:
                self._by_key[rx.key] = replace(cur, in_flight=max(0, cur.in_flight + delta))

    def live(self) -> list[RemoteExecutor]:
        with self._mu:
            return [rx for rx in self._by_key.values() if rx.up]

    def all(self) -> list[RemoteExecutor]:
        with self._mu:
            return sorted(self._by_key.values(), key=lambda rx: rx.key)
