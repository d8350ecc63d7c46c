"""``geode serve --single-process``: the same child builders, all in this process on inproc:// buses."""

from __future__ import annotations

import logging
import os
import queue
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from actors.bus import Bus
from actors.bus.endpoints import Endpoints
from actors.tree.child_handle import IncarnationStore
from actors.tree.config_sections import TreeSettings
from actors.tree.registry import ChildContext, build_child
from actors.tree.reload_rule import ChildReload
from geode.config_source import ConfigSource
from geode.home import GeodeHome
from geode.protocol.errors import NotFound
from geode.protocol.runtime import ChildInfo, ConfigApplied

log = logging.getLogger(__name__)


@dataclass
class _Hosted:
    name: str
    incarnation: int = 0
    state: str = "stopped"
    bus: Bus | None = None
    hosted: Any = None
    ready_at: float = 0.0
    starts: int = 0
    reload: ChildReload | None = None


class SingleProcessTree:
    """Mirrors :class:`~actors.supervisor.Supervisor`'s API (snapshot, request_stop, request_restart, run)."""

    def __init__(
        self,
        names: list[str],
        home: GeodeHome,
        source: ConfigSource[TreeSettings],
        incarnations: IncarnationStore | None = None,
    ) -> None:
        self._home = home
        self._source = source  # one for every child of this process: one reload replaces it for all
        self._endpoints = Endpoints.from_config(home, single_process=True, bus=source.snapshot.bus)
        self._order = list(names)
        self._kids = {n: _Hosted(n) for n in names}
        self._incarnations = incarnations or IncarnationStore(None)
        self._cmds: queue.SimpleQueue[tuple[str, Any]] = queue.SimpleQueue()
        self._died: list[Callable[[str, int, str], None]] = []
        self.state = "running"

    def on_child_died(self, callback: Callable[[str, int, str], None]) -> None:
        self._died.append(callback)

    def snapshot(self) -> list[ChildInfo]:
        now, pid = time.monotonic(), os.getpid()
        return [
            ChildInfo(
                name=k.name,
                pid=pid if k.state == "running" else None,
                incarnation=k.incarnation,
                state=k.state,
                uptime_s=round(now - k.ready_at, 3) if k.state == "running" else 0.0,
                restarts=max(0, k.starts - 1),
            )
            for k in (self._kids[n] for n in self._order)
        ]

    def request_stop(self) -> None:
        self._cmds.put(("stop", None))

    def request_restart(self, name: str) -> None:
        if name not in self._kids:
            raise NotFound(f"no child named {name!r}")
        self._cmds.put(("restart", name))

    def run(self, *, install_signals: bool = True) -> int:
        if install_signals:
            for sig in (signal.SIGTERM, signal.SIGINT):
                signal.signal(sig, lambda s, _f: self._cmds.put(("signal", s)))
        for name in self._order:
            self._start(self._kids[name])
        while self.state == "running":
            try:
                cmd, arg = self._cmds.get(timeout=0.5)
            except queue.Empty:
                continue
            if cmd in ("stop", "signal"):
                self.state = "stopping"
            elif cmd == "restart":
                kid = self._kids[arg]
                self._stop(kid, "restart requested")
                self._start(kid)
        for name in reversed(self._order):
            self._stop(self._kids[name], "tree stopping")
        return 0

    def _start(self, kid: _Hosted) -> None:
        kid.incarnation = self._incarnations.next(kid.name)
        kid.starts += 1
        kid.state = "starting"
        kid.bus = Bus(
            kid.name, kid.incarnation, self._home, single_process=True, endpoints=self._endpoints
        ).start()
        ctx = ChildContext(kid.name, kid.incarnation, self._home, self._source, single_process=True)
        try:
            kid.hosted = build_child(kid.bus, ctx)
        except Exception:
            log.exception("%s#%d failed to start", kid.name, kid.incarnation)
            kid.bus.stop()
            kid.state = "fatal"
            return
        kid.state = "running"
        kid.ready_at = time.monotonic()
        kid.reload = ChildReload(ctx, kid.hosted, lambda: self.request_restart(kid.name))

    def reload_now(self, stamp: str, names: list[str]) -> list[ConfigApplied]:
        """`geode reload` (the supervisor service calls it: no event crosses to inproc buses): apply it in
        each running child named; a child restarting to apply it is not among the confirmations."""
        done = [k.reload.apply(stamp) for k in self._kids.values() if k.name in names and k.reload]
        return [c for c in done if c is not None]

    def _stop(self, kid: _Hosted, reason: str) -> None:
        if kid.bus is None:
            return
        try:
            if kid.hosted is not None and hasattr(kid.hosted, "stop"):
                kid.hosted.stop()
        except Exception:
            log.exception("stopping %s failed", kid.name)
        kid.bus.stop()
        kid.bus, kid.hosted = None, None
        if kid.state != "fatal":
            kid.state = "stopped"
        for cb in self._died:
            cb(kid.name, kid.incarnation, reason)
