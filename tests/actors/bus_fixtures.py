"""Test-only message types and a service (echo, slow, boom, ping) for the bus tests and their peer."""

from __future__ import annotations

import os
import time
from typing import Any

from pydantic import BaseModel

from geode.protocol import runtime
from geode.protocol.catalog import message
from geode.protocol.transport import Request


class Echo(BaseModel):
    text: str = ""
    delay_s: float = 0.0


class Boom(BaseModel):
    """Makes the handler raise."""


ECHO = message("test.echo", Echo, None)
BOOM = message("test.boom", Boom, None)


class FixtureService:
    """Answers ping/status/echo; ``test.boom`` raises a plain exception (→ ``internal``)."""

    def __init__(self, name: str, incarnation: int) -> None:
        self.name = name
        self.incarnation = incarnation
        self.casts: list[Request] = []

    def handle(self, request: Request) -> BaseModel | dict[str, Any] | None:
        if request.type == runtime.PING:
            return runtime.Pong(name=self.name, incarnation=self.incarnation, pid=os.getpid())
        if request.type == ECHO:
            body = request.body
            assert isinstance(body, Echo)
            if body.delay_s:
                time.sleep(body.delay_s)
            self.casts.append(request)
            return {"text": body.text, "from": request.sender}
        if request.type == BOOM:
            raise ZeroDivisionError("boom")
        return {}
