"""``[control]``: the control socket's section and its defaults (a leaf: the control core imports these)."""

from __future__ import annotations

from pydantic import BaseModel, Field

QUEUE_MAX = 64  # requests waiting per connection before it is answered overloaded
IDLE_TIMEOUT_S = 10.0  # a connection silent for longer than this is closed (heartbeat lost)
HANDSHAKE_DEADLINE_S = 5.0  # a connection with no handshake by then is dropped


class ControlSection(BaseModel):
    """``[control]`` (read by ``actors/control.py``)."""

    idle_timeout_s: float = Field(default=IDLE_TIMEOUT_S, gt=0)
    queue_max: int = Field(default=QUEUE_MAX, ge=1)
    handshake_deadline_s: float = Field(default=HANDSHAKE_DEADLINE_S, gt=0)
