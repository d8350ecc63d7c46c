"""The envelope every bus message travels in (DESIGN.md §4), as a pydantic model."""

from __future__ import annotations

import os
import random
import time
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field

PROTOCOL_VERSION: Final = 1
MAX_TYPE_LEN = 64
TRACEPARENT_PATTERN: Final = r"^00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$"

# Seeded once from the OS (and again in every forked child): os.urandom per id is a GIL-releasing
# syscall on every message, which measurably convoys the bus's threads.
_rng = random.Random(os.urandom(32))
os.register_at_fork(after_in_child=lambda: _rng.seed(os.urandom(32)))


def new_id() -> str:
    """A unique message id (24 hex chars: time-ordered prefix + 56 random bits)."""
    return f"{time.time_ns() // 1_000_000:011x}{_rng.getrandbits(56):014x}"[:24]


def now_ms() -> int:
    return time.time_ns() // 1_000_000


class Envelope(BaseModel):
    """One message: version, id, dotted type, correlation, sender, session, deadline and typed body.

    ``kind`` tells requests (a reply is owed), casts (one-way) and the two terminal reply kinds apart.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    v: Literal[1] = PROTOCOL_VERSION
    id: str = Field(default_factory=new_id, min_length=1, max_length=64)
    kind: Literal["request", "cast", "ok", "error"] = "request"
    type: str = Field(min_length=1, max_length=MAX_TYPE_LEN, pattern=r"^[a-z][a-z0-9_]*(\.[a-z0-9_]+)*$")
    corr: str | None = Field(default=None, max_length=64)
    sender: str = Field(alias="from", default="", max_length=128)
    session: str | None = Field(default=None, max_length=128)
    deadline: int | None = None
    body: dict[str, Any] = Field(default_factory=dict)
    # W3C traceparent of the sender's span: only with tracing on, only toward a peer that takes it (a peer of
    # the previous release forbids unknown fields); docs/observability.md
    trace: str | None = Field(default=None, max_length=55, pattern=TRACEPARENT_PATTERN)

    def reply_ok(self, body: dict[str, Any] | None = None, *, sender: str = "") -> Envelope:
        return Envelope(
            kind="ok", type=self.type, corr=self.id, session=self.session, body=body or {}, **{"from": sender}
        )

    def reply_error(self, code: str, message: str, *, sender: str = "") -> Envelope:
        return Envelope(
            kind="error",
            type=self.type,
            corr=self.id,
            session=self.session,
            body={"code": code, "message": message[:2048]},
            **{"from": sender},
        )

    def expired(self, at_ms: int | None = None) -> bool:
        return self.deadline is not None and (at_ms if at_ms is not None else now_ms()) > self.deadline
