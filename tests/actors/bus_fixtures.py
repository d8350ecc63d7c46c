"""Test-only message types and a service (echo, slow, boom, ping) for the bus tests and their peer."""

from __future__ import annotations

import os
import threading
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


class Busy(BaseModel):
    """How many delayed echoes the service is handling right now."""


ECHO = message("test.echo", Echo, None)
BOOM = message("test.boom", Boom, None)
BUSY = message("test.busy", Busy, None)


class FixtureService:
    """Answers ping/status/echo/busy; ``test.boom`` raises a plain exception (→ ``internal``)."""

    def __init__(self, name: str, incarnation: int) -> None:
        self.name = name
        self.incarnation = incarnation
        self.casts: list[Request] = []
        self._lock = threading.Lock()
        self.busy = 0

    def handle(self, request: Request) -> BaseModel | dict[str, Any] | None:
        if request.type == runtime.PING:
            return runtime.Pong(name=self.name, incarnation=self.incarnation, pid=os.getpid())
        if request.type == ECHO:
            body = request.body
            assert isinstance(body, Echo)
            if body.delay_s:
                with self._lock:
                    self.busy += 1
                time.sleep(body.delay_s)  # the slow handler itself (not a wait in a test)
                with self._lock:
                    self.busy -= 1
            self.casts.append(request)
            return {"text": body.text, "from": request.sender}
        if request.type == BUSY:
            with self._lock:
                return {"busy": self.busy}
        if request.type == BOOM:
            raise ZeroDivisionError("boom")
        return {}
