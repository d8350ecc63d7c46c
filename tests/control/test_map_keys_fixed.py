"""No map key that grows with the flows: msgpack's unpacker interns every str map key it reads, and CPython
3.12's interned strings are immortal, so a frame or record keyed by a session, turn or call id keeps each id
for good in every process that unpacks it (geode/lanes/queue.py stats: held lanes and queue lengths are rows).

In one process over the real store and lanes (tests/control/harness.py: every request, reply and record goes
through msgpack), each flow is a new session whose turn holds its lane while the operator asks ``cli.status``,
``cli.sessions`` and ``cli.receipts``, then is cancelled; then a turn asks an approval, granted. Every map key
unpacked is collected: the flows' ids (sessions, turns, approvals) are never among them, and flows 3 to 6 add
no key the first two did not."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import msgpack
import pytest

from geode.lanes.queue import LaneQueue
from geode.protocol import control as c
from geode.protocol import lanes as lanes_msg
from tests.control.harness import ScriptedWorker, Tree
from tests.map_keys import Keys, watch_keys


@pytest.fixture
def keys(monkeypatch: pytest.MonkeyPatch) -> Keys:
    return watch_keys(monkeypatch)


@pytest.fixture
def tree(tmp_path: Path) -> Iterator[Tree]:
    t = Tree(tmp_path)
    yield t
    t.close()


def _flow(tree: Tree, n: int, ids: set[str]) -> None:
    cl = tree.client(f"c{n}")
    turn = cl.request(c.PROMPT, {"text": "slow"}).body["turn_id"]
    ids |= {cl.session_id, turn}  # type: ignore[attr-defined]
    cl.wait(
        lambda f: f.type == c.CLI_EVENT and f.body.get("kind") == "round_start" and f.body["turn_id"] == turn
    )
    status = cl.request(c.STATUS)
    assert status.kind == "ok", status.body
    held = status.body["lanes"]["lanes"]["held_lanes"]
    assert cl.session_id in str(held)  # type: ignore[attr-defined]  # (its turn holds the lane)
    assert cl.request(c.SESSIONS).kind == "ok"
    assert cl.request(c.RECEIPTS, {"session_id": cl.session_id}).kind == "ok"  # type: ignore[attr-defined]
    assert cl.request(c.CLI_CANCEL, {"turn_id": turn}).kind == "ok"
    assert cl.wait_done(turn)["termination_reason"] == "user_cancelled"
    asked = cl.request(c.PROMPT, {"text": "approve:write_file"}).body["turn_id"]  # an approval, granted
    ask = cl.wait(lambda f: f.type == c.CLI_EVENT and f.body.get("kind") == lanes_msg.APPROVAL_REQUEST)
    approval = ask.body["data"]["approval_id"]
    ids |= {asked, approval}
    assert cl.request(c.APPROVAL_RESPONSE, {"approval_id": approval, "decision": "y"}).kind == "ok"
    cl.wait_done(asked)


def test_no_map_key_grows_with_sessions_and_turns(tree: Tree, keys: Keys) -> None:
    ScriptedWorker(tree.reg).ready()
    ids: set[str] = set()
    for n in (1, 2):
        _flow(tree, n, ids)
    after_two = set(keys.seen)
    for n in (3, 4, 5, 6):
        _flow(tree, n, ids)
    assert not keys.seen & ids, f"ids unpacked as map keys: {sorted(keys.seen & ids)}"
    assert keys.seen == after_two, f"keys first seen after two flows: {sorted(keys.seen - after_two)}"


def test_lane_stats_name_sessions_in_rows() -> None:
    q = LaneQueue(global_cap=1)
    for s in ("s-one", "s-two"):
        q.enqueue(f"t-{s}", s)
        q.enqueue(f"u-{s}", s)
    q.grant()
    k = Keys()
    k.walk(msgpack.unpackb(msgpack.packb(q.stats())))
    assert not k.seen & {"s-one", "s-two", "t-s-one", "t-s-two"}
