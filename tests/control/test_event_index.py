"""Control finds the connections of a stream event by an index of attached sessions, not by a scan of every
connection, and sends each event without a second pydantic pass (issue 34 session 5, RELAY). The work is
counted: table snapshots and model dumps per event. Who gets an event is what it was: the connections
attached to its session, not one that attached 16 sessions since, nor one that left."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from geode.control.connection import MAX_ATTACHED
from geode.control.slots import SlotTable
from geode.protocol import control as c
from geode.protocol import lanes as lanes_msg
from tests.control.harness import Client, Tree

OTHERS = 60  # connections attached to other sessions: an event of ours must not look at them


@pytest.fixture
def tree(tmp_path: Path) -> Iterator[Tree]:
    t = Tree(tmp_path)
    yield t
    t.close()


def _ev(sid: str, seq: int, kind: str = "tokens") -> lanes_msg.StreamEvent:
    return lanes_msg.StreamEvent(session_id=sid, turn_id="t-1", seq=seq, kind=kind, data={"n": seq})


def _got(cl: Client) -> list[int]:
    out: list[int] = []
    for f in cl.raw:
        if f.type == c.CLI_EVENTS:
            out += [e["seq"] for e in f.body["events"]]
        elif f.type == c.CLI_EVENT:
            out.append(f.body["seq"])
    return out


class _Count:
    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.snapshots = self.dumps = 0
        snapshot, dump = SlotTable.snapshot, BaseModel.model_dump

        def counted_snapshot(table: SlotTable) -> Any:
            self.snapshots += 1
            return snapshot(table)

        def counted_dump(model: BaseModel, *a: Any, **kw: Any) -> Any:
            self.dumps += isinstance(model, lanes_msg.StreamEvent)  # the harness dumps its envelopes
            return dump(model, *a, **kw)

        monkeypatch.setattr(SlotTable, "snapshot", counted_snapshot)
        monkeypatch.setattr(BaseModel, "model_dump", counted_dump)


def test_an_event_goes_to_its_sessions_connections_without_a_scan_or_a_dump(
    tree: Tree, monkeypatch: pytest.MonkeyPatch
) -> None:
    mine, old = tree.client("c-mine"), tree.client("c-old", features=["attach", "stable_events"])
    sid = mine.session_id  # type: ignore[attr-defined]
    old.core._conn("c-old").attach(sid, 0)  # a second connection on the same session (no event_batches)
    for i in range(OTHERS):  # connections of other sessions
        tree.core._conn(f"x-{i}").attach(f"other-{i}", 0)
    n = _Count(monkeypatch)
    tree.core.on_origin_events([_ev(sid, 1), _ev(sid, 2)])
    tree.core.on_origin_event(_ev(sid, 3))
    assert _got(mine)[-3:] == [1, 2, 3] and _got(old)[-3:] == [1, 2, 3]
    frames = [f for f in mine.raw if f.type == c.CLI_EVENTS]
    assert frames[-1].body["events"][0] == {
        "session_id": sid,
        "turn_id": "t-1",
        "seq": 1,
        "kind": "tokens",
        "data": {"n": 1},
    }  # what catalog.dump of the event gave
    assert n.snapshots == 0  # before: the whole table copied and scanned per event (3)
    assert n.dumps == 0  # before: one model_dump per event per connection (6)


def test_a_connection_gets_no_events_of_a_session_it_no_longer_holds(tree: Tree) -> None:
    cl = tree.client("c-1")
    sid = cl.session_id  # type: ignore[attr-defined]
    conn = tree.core._conn("c-1")
    for i in range(MAX_ATTACHED):  # 16 sessions attached since: the oldest (ours) is let go
        conn.attach(f"s-{i}", 0)
    assert sid not in conn.attached and tree.core.slots.attached_to(sid) == []
    tree.core.on_origin_event(_ev(sid, 1))
    assert _got(cl) == []
    tree.core.on_origin_event(_ev("s-3", 1))
    assert _got(cl) == [1]
    tree.core.disconnect("c-1")  # gone: out of the index, nothing sent to it
    assert tree.core.slots.attached_to("s-3") == [] and tree.core.slots.index.sessions() == 0
    tree.core.on_origin_event(_ev("s-3", 2))
    assert _got(cl) == [1]


def test_a_replay_that_outlived_its_attachment_takes_the_session_again(tree: Tree) -> None:
    cl = tree.client("c-1")
    conn = tree.core._conn("c-1")
    conn.attach("s-r", 0, replaying=True)
    for i in range(MAX_ATTACHED):
        conn.attach(f"s-{i}", 0)  # s-r let go while its replay ran
    assert tree.core.slots.attached_to("s-r") == []
    tree.core._deliver(conn, conn.finish_replay("s-r", [_ev("s-r", 1)]))
    tree.core.on_origin_event(_ev("s-r", 2))  # live again, as before the index
    assert _got(cl) == [1, 2] and tree.core.slots.attached_to("s-r") == [conn]
