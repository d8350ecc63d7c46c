"""The ``messengers`` child: hosts one poller per enabled messenger platform (none are built yet).

Until a platform translator exists it serves its endpoint with lifecycle answers: ``runtime.ping``,
``runtime.status`` (``platforms: []``), ``runtime.child_died``; ``messenger.send`` and anything else is
:class:`Unavailable` ("no messenger platform is enabled").
"""

from __future__ import annotations

import os
import time
from typing import Any

from pydantic import BaseModel

from actors.bus import Bus
from actors.tree.registry import ChildContext
from geode.protocol import messengers as messengers_msg
from geode.protocol import runtime
from geode.protocol.dispatch import Dispatch
from geode.protocol.errors import Unavailable
from geode.protocol.transport import Request


class MessengersService:
    """Lifecycle answers for the ``messengers`` endpoint; remembers the deaths it was told about."""

    def __init__(self, name: str, incarnation: int) -> None:
        self.name = name
        self.incarnation = incarnation
        self.started = time.monotonic()
        self.deaths: list[runtime.ChildDied] = []
        self.dispatch = Dispatch(
            name,
            {
                runtime.PING: lambda b, r: runtime.Pong(name=name, incarnation=incarnation, pid=os.getpid()),
                runtime.STATUS: self._status,
                runtime.CHILD_DIED: self._child_died,
                messengers_msg.SEND: self._send,
            },
        )

    def handle(self, request: Request) -> BaseModel | dict[str, Any] | None:
        if request.type not in self.dispatch.types:
            raise Unavailable(f"{self.name}: no messenger platform is enabled ({request.type})")
        return self.dispatch.handle(request)

    def _status(self, b: runtime.StatusQuery, r: Request) -> runtime.StatusReply:
        detail = {"platforms": [], "uptime_s": round(time.monotonic() - self.started, 3)}
        return runtime.StatusReply(
            name=self.name, incarnation=self.incarnation, pid=os.getpid(), detail=detail
        )

    def _child_died(self, b: runtime.ChildDied, r: Request) -> runtime.Ack:
        self.deaths.append(b)
        return runtime.Ack()

    def _send(self, b: messengers_msg.SendMessage, r: Request) -> messengers_msg.MessageSent:
        """No platform translator exists yet (issue 13): every send is refused, nothing is posted."""
        platform = b.channel.split(":", 1)[0]
        raise Unavailable(
            f"no messenger platform is enabled in this GEODE (asked for {platform!r}; "
            "messenger platforms are not available yet)"
        )


def build(bus: Bus, ctx: ChildContext) -> None:
    bus.serve(ctx.name, MessengersService(ctx.name, ctx.incarnation))
