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
