"""The ``messengers`` child: hosts one poller per enabled messenger platform (none are built yet).

Until a platform translator exists it serves its endpoint with lifecycle answers only: ``runtime.ping``,
``runtime.status`` (``platforms: []``) and ``runtime.child_died``; anything else is :class:`Unavailable`.
"""

from __future__ import annotations

import os
import time
from typing import Any

from pydantic import BaseModel

from actors.bus import Bus
from actors.tree.registry import ChildContext
from geode.protocol import runtime
from geode.protocol.errors import Unavailable
from geode.protocol.transport import Request


class MessengersService:
    """Lifecycle answers for the ``messengers`` endpoint; remembers the deaths it was told about."""

    def __init__(self, name: str, incarnation: int) -> None:
        self.name = name
        self.incarnation = incarnation
        self.started = time.monotonic()
        self.deaths: list[runtime.ChildDied] = []

    def handle(self, request: Request) -> BaseModel | dict[str, Any] | None:
        if request.type == runtime.PING:
            return runtime.Pong(name=self.name, incarnation=self.incarnation, pid=os.getpid())
        if request.type == runtime.STATUS:
            detail = {"platforms": [], "uptime_s": round(time.monotonic() - self.started, 3)}
            return runtime.StatusReply(
                name=self.name, incarnation=self.incarnation, pid=os.getpid(), detail=detail
            )
        if request.type == runtime.CHILD_DIED:
            assert isinstance(request.body, runtime.ChildDied)
            self.deaths.append(request.body)
            return runtime.Ack()
        raise Unavailable(f"{self.name}: no messenger platform is enabled ({request.type})")


def build(bus: Bus, ctx: ChildContext) -> None:
    bus.serve(ctx.name, MessengersService(ctx.name, ctx.incarnation))
