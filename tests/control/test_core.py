"""ControlCore in one process over a real store and LanesService: handshake, prompts, approvals, attach."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import msgpack
import pytest

from geode.protocol import codec
from geode.protocol import control as c
from geode.protocol import lanes as lanes_msg
from geode.protocol.envelope import Envelope
from tests.control.harness import Client, FnService, ScriptedWorker, Tree
from tests.waiting import poll_for


def _wait_done(tree: Tree, turn: str, timeout_s: float) -> None:
    def done() -> bool:
        rec = tree.lanes.records.get_turn(turn)
        return rec is not None and rec.state == "done"

    poll_for(done, timeout_s, what=f"turn {turn} done")


def tools(w: ScriptedWorker) -> list[str]:
    return [e.split()[1] for e in w.effects if e.startswith("tool ")]


@pytest.fixture
def tree(tmp_path: Path) -> Iterator[Tree]:
    t = Tree(tmp_path)
    yield t
    t.close()


def test_not_ready_before_handshake_and_version_check(tree: Tree) -> None:
    cl = Client(tree.core, "c1")
    tree.clients["c1"] = cl
    r = cl.request(c.PROMPT, {"text": "hi"})
    assert r.kind == "error" and r.body["code"] == "not_ready"
    assert cl.request(c.PING).kind == "ok"
    r = cl.request(c.HANDSHAKE, {"protocol_version": "geode.control.v0"})
    assert r.kind == "error" and r.body["code"] == "bad_request"
    r = cl.request(c.HANDSHAKE, {"protocol_version": c.CONTROL_PROTOCOL, "features": ["attach", "bogus"]})
    assert r.kind == "ok" and r.body["features"] == ["attach"] and r.body["session_id"].startswith("s-")


def test_prompt_streams_events_then_done(tree: Tree) -> None:
    ScriptedWorker(tree.reg).ready()
    cl = tree.client("c1")
    r = cl.request(c.PROMPT, {"text": "hello"})
    assert r.kind == "ok"
    result = cl.wait_done(r.body["turn_id"])
    assert result["text"] == "answer to hello" and result["termination_reason"] == "natural"
    kinds = [e["kind"] for e in cl.events()]
    assert (
        kinds[:2] == [lanes_msg.TURN_QUEUED, lanes_msg.TURN_STARTED]
        and "text_delta" in kinds
        and kinds[-1] == lanes_msg.TURN_DONE
    )
    seqs = [e["seq"] for e in cl.events()]
    assert seqs == sorted(seqs)
    rec = tree.lanes.records.get_turn(r.body["turn_id"])
    assert rec is not None and rec.state == "done" and rec.outcome["text"] == "answer to hello"  # type: ignore[index]


@pytest.mark.parametrize(("answer", "ran"), [("y", True), ("n", False)])
def test_approval_round_trip(tree: Tree, answer: str, ran: bool) -> None:
    w = ScriptedWorker(tree.reg)
    w.ready()
    cl = tree.client("c1")
    turn = cl.request(c.PROMPT, {"text": "approve:write_file"}).body["turn_id"]
    ask = cl.wait(lambda f: f.type == c.CLI_EVENT and f.body["kind"] == lanes_msg.APPROVAL_REQUEST)
    assert ask.body["data"]["tool_name"] == "write_file"
    assert tools(w) == []  # the tool cannot start before the decision
    ok = cl.request(c.APPROVAL_RESPONSE, {"approval_id": ask.body["data"]["approval_id"], "decision": answer})
    assert ok.kind == "ok"
    cl.wait_done(turn)
    assert (tools(w) == ["write_file"]) is ran


def test_disconnect_while_pending_denies(tree: Tree) -> None:
    w = ScriptedWorker(tree.reg)
    w.ready()
    cl = tree.client("c1")
    turn = cl.request(c.PROMPT, {"text": "approve:run_bash"}).body["turn_id"]
    cl.wait(lambda f: f.type == c.CLI_EVENT and f.body["kind"] == lanes_msg.APPROVAL_REQUEST)
    assert tree.core.disconnect("c1") == 1
    _wait_done(tree, turn, 2)
    assert tools(w) == []


def test_skip_permissions_is_per_connection(tree: Tree) -> None:
    w = ScriptedWorker(tree.reg)
    w.ready()
    cl = tree.client("c1", dangerously_skip_permissions=True)
    turn = cl.request(c.PROMPT, {"text": "approve:write_file"}).body["turn_id"]
    cl.wait_done(turn)
    assert tools(w) == ["write_file"]
    other = tree.client("c2")
    assert not tree.core._conns["c2"].skip_permissions and other


def test_garbage_frames_answered_with_bad_request(tree: Tree) -> None:
    cl = tree.client("c1")
    frames = [
        b"",
        b"\xc1\xff\x00",
        msgpack.packb([1, 2, 3]),
        msgpack.packb({"v": 1, "type": "cli.prompt"})[:-3],
        b"x" * (codec.MAX_FRAME_BYTES + 1),
        msgpack.packb({"v": 1, "id": "a", "kind": "request", "type": "cli.prompt", "body": {"text": 5}}),
        msgpack.packb({"v": 1, "id": "b", "kind": "request", "type": "lanes.submit", "body": {}}),
        msgpack.packb({"v": 1, "id": "c", "kind": "request", "type": "cli.nope", "body": {}}),
        msgpack.packb({"v": 1, "id": "d", "kind": "ok", "type": "cli.ping", "body": {}}),
    ]
    for f in frames:
        tree.core.on_frame("c1", f)
    errors = [f for f in cl.frames if f.kind == "error"]
    assert len(errors) == len(frames) - 1 and all(e.body["code"] == "bad_request" for e in errors)
    assert cl.request(c.PING).kind == "ok"  # still alive


def test_overloaded_when_connection_queue_full(tree: Tree) -> None:
    jobs: list = []
    tree.core.runner = jobs.append  # nothing runs: the connection's queue only fills
    tree.core.queue_max = 2
    cl = Client(tree.core, "c9")
    tree.clients["c9"] = cl
    for _ in range(3):
        tree.core.on_envelope("c9", Envelope(type=c.HANDSHAKE, body={}))
    over = cl.wait(lambda f: f.kind == "error")
    assert over.body["code"] == "overloaded" and len(jobs) == 1


def test_reattach_after_control_restart_receives_the_rest(tree: Tree) -> None:
    w = ScriptedWorker(tree.reg)
    w.ready()
    cl = tree.client("c1")
    sid = cl.session_id  # type: ignore[attr-defined]
    turn = cl.request(c.PROMPT, {"text": "approve:write_file"}).body["turn_id"]
    cl.wait(lambda f: f.type == c.CLI_EVENT and f.body["kind"] == lanes_msg.APPROVAL_REQUEST)
    last_seq = cl.events()[-1]["seq"]
    tree.lanes.child_died("control", 1)  # control dies: its pending approval is denied
    tree.start_control()  # a new incarnation with no connection state
    cl.frames.clear()
    cl.request(c.HANDSHAKE, {"protocol_version": c.CONTROL_PROTOCOL, "session_id": sid})
    r = cl.request(c.ATTACH, {"session_id": sid, "after_seq": last_seq})
    assert r.kind == "ok", r.body
    result = cl.wait_done(turn)
    assert result["termination_reason"] == "natural" and tools(w) == []
    seqs = [e["seq"] for e in cl.events()]
    assert seqs == sorted(set(seqs)) and min(seqs) > last_seq


def test_cancel_running_turn(tree: Tree) -> None:
    w = ScriptedWorker(tree.reg)
    w.ready()
    cl = tree.client("c1")
    turn = cl.request(c.PROMPT, {"text": "slow"}).body["turn_id"]
    cl.wait(lambda f: f.type == c.CLI_EVENT and f.body["kind"] == "round_start")
    r = cl.request(c.CLI_CANCEL, {"turn_id": turn})
    assert r.body["state"] == "cancellation_requested"
    assert cl.wait_done(turn)["termination_reason"] == "user_cancelled"
    assert any(e.startswith("first-effect") for e in w.effects)
    again = cl.request(c.PROMPT, {"text": "hello"}).body["turn_id"]  # the session is still usable
    assert cl.wait_done(again)["termination_reason"] == "natural"


def test_errors_are_typed_and_redacted(tree: Tree) -> None:
    from geode.protocol.errors import Unavailable

    cl = tree.client("c1")

    def boom(body, request):  # type: ignore[no-untyped-def]
        raise Unavailable("store said: Authorization: Bearer sk-live-abcdefghijklmnop token=hunter2hunter2")

    tree.core.dispatch.routes[c.SESSIONS] = boom
    r = cl.request(c.SESSIONS)
    assert r.kind == "error" and r.body["code"] == "unavailable"
    assert "abcdefghijklmnop" not in r.body["message"] and "hunter2" not in r.body["message"]

    def bug(body, request):  # type: ignore[no-untyped-def]
        raise RuntimeError("password=swordfish123")

    tree.core.dispatch.routes[c.STATUS] = bug
    r = cl.request(c.STATUS)
    assert r.body["code"] == "internal" and "swordfish" not in r.body["message"]
    assert cl.request(c.PING).kind == "ok"


def test_explicit_exit_while_pending_denies(tree: Tree) -> None:
    w = ScriptedWorker(tree.reg)
    w.ready()
    cl = tree.client("c1")
    turn = cl.request(c.PROMPT, {"text": "approve:write_file"}).body["turn_id"]
    cl.wait(lambda f: f.type == c.CLI_EVENT and f.body["kind"] == lanes_msg.APPROVAL_REQUEST)
    assert cl.request(c.EXIT).kind == "ok"
    _wait_done(tree, turn, 5)
    assert tools(w) == []
    assert "c1" not in tree.core._conns


def test_rehandshake_with_a_session_waits_for_attach(tree: Tree) -> None:
    cl = tree.client("c1")
    sid = cl.session_id  # type: ignore[attr-defined]
    other = tree.client("c2", session_id=sid)
    assert other.session_id == sid  # type: ignore[attr-defined]
    assert sid not in tree.core._conns["c2"].attached  # no live events before its replay
    assert other.request(c.ATTACH, {"session_id": sid, "after_seq": 0}).kind == "ok"
    assert sid in tree.core._conns["c2"].attached


def test_attach_while_lanes_does_not_answer_gives_the_stores_outcomes(tree: Tree) -> None:
    """lanes killed again and again: a client's catch-up still learns the answer of its turn, which the
    store holds, instead of waiting for one lanes incarnation to live long enough to reply."""
    from geode.protocol.errors import Unavailable

    ScriptedWorker(tree.reg).ready()
    cl = tree.client("c1")
    sid = cl.session_id  # type: ignore[attr-defined]
    turn = cl.request(c.PROMPT, {"text": "hello"}).body["turn_id"]
    cl.wait_done(turn)

    def dead(r: object) -> None:
        raise Unavailable("lanes is restarting")

    tree.reg.register("lanes", FnService(dead))
    r = cl.request(c.ATTACH, {"session_id": sid, "after_seq": 0})
    assert r.kind == "ok", r.body
    assert r.body["complete"] is False and r.body["replayed"] == 0
    [got] = [o for o in r.body["outcomes"] if o["turn_id"] == turn]
    assert got["state"] == "done" and got["outcome"]["text"] == "answer to hello"

    tree.reg.register("store", FnService(dead))  # neither answers: the client hears lanes' error
    r = cl.request(c.ATTACH, {"session_id": sid, "after_seq": 0})
    assert r.kind == "error" and r.body["code"] == "unavailable"
