"""ControlCore sends a connection its session's events in seq order even when a live event from lanes
arrives while a replay (cli.attach) is being sent: the client drops an event older than the last it saw,
so a live ``turn_done`` that overtook the replay used to cost the client the replayed events (the resumed
``turn_started`` of tests/control/test_tree_crashes.py went missing about 1 run in 3 under load)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from geode.control.connection import ConnState
from geode.control.core import ControlCore
from geode.home import GeodeHome
from geode.protocol import control as c
from geode.protocol import lanes as lanes_msg
from geode.protocol.envelope import Envelope

SID = "s-order"


def _ev(seq: int, kind: str = "text") -> lanes_msg.StreamEvent:
    return lanes_msg.StreamEvent(session_id=SID, turn_id="t-1", seq=seq, kind=kind, data={})


class ReplayingLanes:
    """Answers ``lanes.replay`` with seqs 1..3."""

    def call(self, target: str, type_: str, body: Any = None, **_kw: Any) -> dict[str, Any]:
        assert type_ == lanes_msg.REPLAY, type_
        return lanes_msg.Replayed(events=[_ev(1), _ev(2), _ev(3)], complete=True).model_dump()

    def cast(self, *a: Any, **kw: Any) -> None:
        return None


def test_a_live_event_never_overtakes_the_replay_being_sent(tmp_path: Path) -> None:
    sent: list[int] = []
    live: list[threading.Thread] = []
    core: ControlCore

    def send(conn_id: str, env: Envelope) -> None:
        if env.type != c.CLI_EVENT:
            return
        sent.append(int(env.body["seq"]))
        if env.body["seq"] == 1:  # lanes pushes the turn's end while the replay is being sent
            t = threading.Thread(target=core.on_origin_event, args=(_ev(4, lanes_msg.TURN_DONE),))
            live.append(t)
            t.start()
            t.join(0.3)  # before: it was sent at once, ahead of seqs 2 and 3; now it waits for them

    home = GeodeHome(tmp_path / "gh").ensure()
    core = ControlCore(ReplayingLanes(), send, home=home)  # type: ignore[arg-type]
    conn = core._conn("k1")
    conn.state = ConnState.READY
    conn.attach(SID, 0)
    core._attach(conn, SID, 0)
    live[0].join(5)
    assert sent == [1, 2, 3, 4]
