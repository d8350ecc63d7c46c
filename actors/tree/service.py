"""The supervisor's own bus endpoint (``supervisor``): ping, status, tree status, restart, stop."""

from __future__ import annotations

import os
from typing import Protocol

from actors.tree import proc_memory
from geode.protocol import runtime
from geode.protocol.dispatch import Dispatch
from geode.protocol.transport import Request


class Tree(Protocol):
    """What the service needs from a (multi- or single-process) tree."""

    state: str

    def snapshot(self) -> list[runtime.ChildInfo]: ...
    def request_stop(self) -> None: ...
    def request_restart(self, name: str) -> None: ...


class SupervisorService:
    def __init__(self, tree: Tree, name: str, incarnation: int, *, single_process: bool = False) -> None:
        self.tree = tree
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
