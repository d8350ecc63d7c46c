"""Several stream events to a client in one frame (issue 34): lanes' ``origin.events`` goes to a connection
whose handshake said ``event_batches`` as one ``cli.events`` frame; to one that did not, one ``cli.event``
each, as before. The CLI's wire reads a ``cli.events`` frame back as the ``cli.event`` frames it stands for.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from actors.cli import wire
from geode.protocol import catalog, codec
from geode.protocol import control as c
from geode.protocol import lanes as lanes_msg
from geode.protocol.envelope import Envelope
from geode.protocol.errors import BadRequest
from tests.control.harness import Tree


@pytest.fixture
def tree(tmp_path: Path) -> Iterator[Tree]:
    t = Tree(tmp_path)
    yield t
    t.close()


def _events(session_id: str, seqs: range, kind: str = "tokens") -> list[lanes_msg.StreamEvent]:
    return [
        lanes_msg.StreamEvent(session_id=session_id, turn_id="t-1", seq=s, kind=kind, data={"n": s})
        for s in seqs
    ]


def test_a_batch_is_one_frame_to_a_client_that_takes_them_and_one_per_event_to_others(tree: Tree) -> None:
    new = tree.client("new")
    old = tree.client("old", features=["attach", "stable_events"])  # an older CLI: no event_batches
    for cl in (new, old):
        sid = cl.session_id  # type: ignore[attr-defined]
        tree.core.on_origin_events(_events(sid, range(1, 4)))
        tree.core.on_origin_events(_events(sid, range(3, 6)))  # 3 again: seq-deduped per connection
    got_new = [f for f in new.raw if f.type in (c.CLI_EVENT, c.CLI_EVENTS)]
    assert [f.type for f in got_new] == [c.CLI_EVENTS, c.CLI_EVENTS]
    assert [[e["seq"] for e in f.body["events"]] for f in got_new] == [[1, 2, 3], [4, 5]]
    got_old = [f for f in old.raw if f.type in (c.CLI_EVENT, c.CLI_EVENTS)]
    assert [f.type for f in got_old] == [c.CLI_EVENT] * 5
    assert [f.body["seq"] for f in got_old] == [1, 2, 3, 4, 5]


def test_approval_requests_still_go_one_to_a_frame(tree: Tree) -> None:
    cl = tree.client("c1")
    sid = cl.session_id  # type: ignore[attr-defined]
    evs = _events(sid, range(1, 3))
    ask = lanes_msg.StreamEvent(
        session_id=sid, turn_id="t-1", seq=3, kind=lanes_msg.APPROVAL_REQUEST, data={"approval_id": "a-1"}
    )
    before = len(cl.raw)
    tree.core.on_origin_events([*evs, ask])
    assert [f.type for f in cl.raw[before:]] == [c.CLI_EVENT] * 3  # an approval's detail: up to 512 KiB


def test_the_cli_wire_reads_a_batch_as_its_events_in_order() -> None:
    evs = _events("s-1", range(7, 10))
    env = Envelope(type=c.CLI_EVENTS, kind="cast", body={"events": [catalog.dump(e) for e in evs]})
    frames = wire.split(wire.decode(codec.encode(env)))
    assert [(f.type, f.body["seq"], f.kind) for f in frames] == [(c.CLI_EVENT, s, "cast") for s in (7, 8, 9)]
    single = Envelope(type=c.CLI_EVENT, kind="cast", body=catalog.dump(evs[0]))
    assert [f.body["seq"] for f in wire.split(wire.decode(codec.encode(single)))] == [7]
    bad = Envelope(type=c.CLI_EVENTS, kind="cast", body={"events": [{"seq": 0}]})
    with pytest.raises(BadRequest):
        wire.decode(codec.encode(bad))
