"""Control asks lanes for a turn's first events in the submit's reply (``Submit.reply_events``) and holds
the session's live events while the submit is in flight (geode/control/held_sessions.py): every connection
attached to the session gets the carried events and the live ones in seq order, none lost to a live event
that overtook the reply (the client drops an event older than the last it saw)."""

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
from geode.protocol.errors import BadRequest

SID = "s-submit"
TID = "t-0123456789abcdef"


def _ev(seq: int, kind: str = "text_delta") -> lanes_msg.StreamEvent:
    return lanes_msg.StreamEvent(session_id=SID, turn_id=TID, seq=seq, kind=kind, data={})


class Lanes:
    """Answers ``lanes.submit`` with seqs 1-2 in the reply, after a live event (seq 3) of the turn arrived
    on another thread (the bus thread in the tree); ``fail``: the submit fails after that event."""

    def __init__(self, fail: bool = False) -> None:
        self.core: ControlCore | None = None
        self.fail = fail
        self.asked: list[Any] = []

    def call(self, target: str, type_: str, body: Any = None, **_kw: Any) -> dict[str, Any]:
        assert type_ == lanes_msg.SUBMIT and self.core is not None, type_
        self.asked.append(body)
        live = threading.Thread(target=self.core.on_origin_events, args=([_ev(3)],))
        live.start()
        live.join(5)
        if self.fail:
            raise BadRequest("refused")
        events = [_ev(1, lanes_msg.TURN_QUEUED), _ev(2, lanes_msg.TURN_STARTED)]
        reply = lanes_msg.Submitted(turn_id=TID, session_id=SID, state="running", events=events)
        return reply.model_dump()

    def cast(self, *a: Any, **kw: Any) -> None:
        return None


def _core(tmp_path: Path, lanes: Lanes) -> tuple[ControlCore, dict[str, list[int]]]:
    sent: dict[str, list[int]] = {}

    def send(conn_id: str, env: Envelope) -> None:
        evs = (
            env.body["events"] if env.type == c.CLI_EVENTS else [env.body] if env.type == c.CLI_EVENT else []
        )
        sent.setdefault(conn_id, []).extend(int(e["seq"]) for e in evs)

    home = GeodeHome(tmp_path / "gh").ensure()
    core = ControlCore(lanes, send, home=home)  # type: ignore[arg-type]
    lanes.core = core
    for cid in ("k1", "k2"):
        conn = core._conn(cid)
        core._handshake(conn, c.Handshake(protocol_version=c.CONTROL_PROTOCOL, session_id=SID))
        conn.state = ConnState.READY
        conn.attach(SID, 0)
    return core, sent


def test_carried_events_then_the_live_ones_to_every_attached_connection(tmp_path: Path) -> None:
    lanes = Lanes()
    core, sent = _core(tmp_path, lanes)
    conn = core._conn("k1")
    out = core._prompt(conn, c.Prompt(text="hi", turn_id=TID))
    assert out.turn_id == TID and lanes.asked[0].reply_events is True
    assert sent == {"k1": [1, 2, 3], "k2": [1, 2, 3]}
    core.on_origin_event(_ev(4))  # nothing in flight: at once
    assert sent["k1"][-1] == 4 and sent["k2"][-1] == 4


def test_a_failed_submit_still_releases_what_was_held(tmp_path: Path) -> None:
    lanes = Lanes(fail=True)
    core, sent = _core(tmp_path, lanes)
    conn = core._conn("k1")
    try:
        core._prompt(conn, c.Prompt(text="hi", turn_id=TID))
    except BadRequest:
        pass
    else:
        raise AssertionError("the submit should have failed")
    assert sent == {"k1": [3], "k2": [3]}
