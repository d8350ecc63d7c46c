"""Lifecycle events the supervisor publishes on ``supervisor.events`` (lossy PUB, for observers only).

Nothing durable depends on them: store and lanes learn of a death through ``runtime.child_died`` (retried
until acknowledged); a loop worker uses ``child_exited`` of the executor to fail its in-flight calls at once.
"""

from __future__ import annotations

from pydantic import BaseModel

CHILD_STARTED = "runtime.event.child_started"
CHILD_READY = "runtime.event.child_ready"
CHILD_EXITED = "runtime.event.child_exited"
TREE_STOPPING = "runtime.event.tree_stopping"
TOPICS = (CHILD_STARTED, CHILD_READY, CHILD_EXITED, TREE_STOPPING)


class ChildEvent(BaseModel):
    """The body of ``child_started`` / ``child_ready`` / ``child_exited`` (``reason`` only on an exit)."""

    name: str
    incarnation: int
    pid: int | None = None
    state: str = ""
    reason: str = ""
