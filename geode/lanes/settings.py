"""``[lanes]``: the turn scheduler's section and its defaults (a leaf: the lanes modules import these)."""

from __future__ import annotations

from pydantic import BaseModel, Field

DEFAULT_MAX_GLOBAL_CAP = 64  # the followed cap's ceiling (``[lanes] max_global_cap``): it bounds spend too
DEFAULT_SESSION_QUEUE = 16  # queued turns per session before submit is refused
MAX_REQUEUES = 5  # worker losses a turn survives; the next one ends it worker_lost
LANES_HANDLERS = 32  # concurrent request handlers of the lanes child


class LanesSection(BaseModel):
    """``[lanes]`` (read by ``actors/lanes.py``)."""

    # turns running at once across the tree; unset: the capacity the registered loop workers offer, up to
    # max_global_cap (the cap also bounds provider spend)
    global_cap: int | None = Field(default=None, ge=1)
    max_global_cap: int = Field(default=DEFAULT_MAX_GLOBAL_CAP, ge=1)
    session_queue_max: int = Field(default=DEFAULT_SESSION_QUEUE, ge=1)
    handlers: int = Field(default=LANES_HANDLERS, ge=1)
    max_requeues: int = Field(default=MAX_REQUEUES, ge=0)  # worker losses a turn survives (then worker_lost)
