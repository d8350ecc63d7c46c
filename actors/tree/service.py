"""The supervisor's own bus endpoint (``supervisor``): ping, status, tree status, restart, stop."""

from __future__ import annotations

import os
from typing import Any, Protocol

from pydantic import BaseModel

from geode.protocol import runtime
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

    def status(self) -> runtime.TreeStatus:
        return runtime.TreeStatus(
            pid=os.getpid(),
            incarnation=self.incarnation,
            state=self.tree.state,
            single_process=self.single_process,
            children=self.tree.snapshot(),
        )

    def handle(self, request: Request) -> BaseModel | dict[str, Any] | None:
        if request.type == runtime.PING:
            return runtime.Pong(name=self.name, incarnation=self.incarnation, pid=os.getpid())
        if request.type == runtime.STATUS:
            detail = {"children": [c.model_dump() for c in self.tree.snapshot()]}
            return runtime.StatusReply(
                name=self.name, incarnation=self.incarnation, pid=os.getpid(), detail=detail
            )
        if request.type == runtime.TREE_STATUS:
            return self.status()
        if request.type == runtime.TREE_RESTART:
            assert isinstance(request.body, runtime.RestartChild)
            self.tree.request_restart(request.body.name)
            return runtime.Ack()
        if request.type == runtime.TREE_STOP:
            self.tree.request_stop()
            return runtime.Ack()
        if request.type == runtime.CHILD_DIED:
            return runtime.Ack()
        return {}
