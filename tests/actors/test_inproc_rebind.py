"""A bus bound at an ``inproc://`` name right after the last one there closed gets the name (libzmq unbinds
a closed socket's inproc name on its reaper thread, after ``close`` returned); a name really held still
fails."""

from __future__ import annotations

import pytest
import zmq

from actors.bus import endpoints
from actors.bus.endpoints import bind_inproc


def test_a_name_closed_a_moment_ago_is_bound_again() -> None:
    ctx = zmq.Context()
    try:
        for _ in range(1000):  # a plain bind fails ~7 times in 1,000 here
            s = ctx.socket(zmq.ROUTER)
            s.setsockopt(zmq.LINGER, 0)
            bind_inproc(s, "inproc://geode-rebind")
            s.close(0)  # the next bind follows at once, as a test's next bus does
    finally:
        ctx.destroy(0)


def test_a_name_still_held_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(endpoints, "INPROC_REBIND_S", 0.05)
    ctx = zmq.Context()
    try:
        held = ctx.socket(zmq.ROUTER)
        held.bind("inproc://geode-held")
        other = ctx.socket(zmq.ROUTER)
        with pytest.raises(zmq.ZMQError) as err:
            bind_inproc(other, "inproc://geode-held")
        assert err.value.errno == zmq.EADDRINUSE
    finally:
        ctx.destroy(0)
