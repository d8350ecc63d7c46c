"""The supervisor's own bus endpoint (``supervisor``): ping, status, tree status, restart, stop, and reload
(`geode reload`: the event to the children and their confirmations)."""

from __future__ import annotations

import os
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, Protocol

from actors.tree import proc_memory
from actors.tree.registry import kind_of
from geode.protocol import lifecycle, runtime
from geode.protocol.dispatch import Dispatch
from geode.protocol.transport import Request

Reload = tuple[dict[str, int], dict[str, runtime.ConfigApplied]]  # (incarnations told, confirmations)


class Tree(Protocol):
    """What the service needs from a (multi- or single-process) tree."""

    state: str

    def snapshot(self) -> list[runtime.ChildInfo]: ...
    def request_stop(self) -> None: ...
    def request_restart(self, name: str) -> None: ...


class SupervisorService:
    def __init__(
        self,
        tree: Tree,
        name: str,
        incarnation: int,
        *,
        single_process: bool = False,
        publish: Callable[[str, dict[str, Any]], None] | None = None,
    ) -> None:
        self.tree = tree
        self.publish = publish
        # reload stamp -> (the incarnations told, the confirmations so far); the last few reloads only
        self._reloads: OrderedDict[str, tuple[dict[str, int], dict[str, runtime.ConfigApplied]]] = (
            OrderedDict()
        )
        self.name = name
        self.incarnation = incarnation
        self.single_process = single_process
        self.dispatch = Dispatch(
            "the supervisor",
            {
                runtime.PING: lambda b, r: runtime.Pong(name=name, incarnation=incarnation, pid=os.getpid()),
                runtime.STATUS: self._runtime_status,
                runtime.TREE_STATUS: lambda b, r: self.status(),
                runtime.TREE_RESTART: self._restart,
                runtime.TREE_STOP: self._stop,
                runtime.CHILD_DIED: lambda b, r: runtime.Ack(),
                runtime.TREE_RELOAD: self._reload,
                runtime.TREE_RELOAD_STATE: self._reload_state,
                runtime.CONFIG_APPLIED: self._applied,
            },
        )
        self.handle = self.dispatch.handle

    def status(self) -> runtime.TreeStatus:
        """The children as the supervisor sees them, with every process's RSS and PSS read now."""
        own = proc_memory.memory(os.getpid())
        zygote = getattr(self.tree, "zygote", None)  # the Supervisor's fork server; None when off
        zyg = proc_memory.memory(zygote.pid if zygote is not None else None)
        children = self.tree.snapshot()
        if self.single_process:  # every child is this process: its memory is the supervisor's, counted once
            mems: list[runtime.ProcessMemory | None] = [own]
        else:
            mems = [proc_memory.memory(c.pid) for c in children]
            children = [proc_memory.with_memory(c, m) for c, m in zip(children, mems, strict=True)]
        return runtime.TreeStatus(
            pid=os.getpid(),
            incarnation=self.incarnation,
            state=self.tree.state,
            single_process=self.single_process,
            children=children,
            rss_bytes=own.rss_bytes if own is not None else None,
            pss_bytes=own.pss_bytes if own is not None else None,
            zygote=zyg,
            total=proc_memory.total([own, zyg, *mems]),
        )

    def _runtime_status(self, b: runtime.StatusQuery, r: Request) -> runtime.StatusReply:
        detail = {"children": [c.model_dump() for c in self.tree.snapshot()]}
        return runtime.StatusReply(
            name=self.name, incarnation=self.incarnation, pid=os.getpid(), detail=detail
        )

    def _restart(self, b: runtime.RestartChild, r: Request) -> runtime.Ack:
        self.tree.request_restart(b.name)
        return runtime.Ack()

    def _stop(self, b: runtime.StopTree, r: Request) -> runtime.Ack:
        self.tree.request_stop()
        return runtime.Ack()

    def _reload(self, b: runtime.ReloadTree, r: Request) -> runtime.ReloadAsked:
        """Tell the running children named (all when none) to apply the tree's new copy; they confirm."""
        wanted = set(b.children)
        told = {
            c.name: c.incarnation
            for c in self.tree.snapshot()
            if c.state == "running" and (not wanted or c.name in wanted or kind_of(c.name) in wanted)
        }
        before, confirmed = self._reloads.pop(b.stamp, ({}, {}))  # asked again: the confirmations stay
        self._reloads[b.stamp] = ({**before, **told}, confirmed)
        while len(self._reloads) > 8:
            self._reloads.popitem(last=False)
        direct = getattr(self.tree, "reload_now", None)  # --single-process: every child is in this process
        if direct is not None:
            for got in direct(b.stamp, sorted(told)):
                confirmed[got.name] = got
        elif self.publish is not None and told:
            event = lifecycle.ConfigReload(stamp=b.stamp, children=sorted(told))
            self.publish(lifecycle.CONFIG_RELOAD, event.model_dump())
        return runtime.ReloadAsked(asked=sorted(told))

    def _applied(self, b: runtime.ConfigApplied, r: Request) -> runtime.Ack:
        if (entry := self._reloads.get(b.stamp)) is not None:
            entry[1][b.name] = b
        return runtime.Ack()

    def _reload_state(self, b: runtime.ReloadQuery, r: Request) -> runtime.ReloadState:
        told, confirmed = self._reloads.get(b.stamp, ({}, {}))
        now = {c.name: c for c in self.tree.snapshot()}
        restarted = [  # started since it was told: it read the new copy at start
            n
            for n, inc in told.items()
            if n not in confirmed
            and (c := now.get(n)) is not None
            and c.incarnation != inc
            and c.state == "running"
        ]
        return runtime.ReloadState(confirmed=list(confirmed.values()), restarted=sorted(restarted))
