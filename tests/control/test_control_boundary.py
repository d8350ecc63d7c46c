"""The control boundary in one process (issue 10, findings 5, 6, 9): silent connections cannot hold the slots,
the skip-permissions flag belongs to the turn, and an approval is answered only where it was delivered."""

from __future__ import annotations

import stat
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from geode.control.core import MAX_CONNECTIONS
from geode.loop.snapshot import StepSnapshot
from geode.protocol import control as c
from geode.protocol import lanes as lanes_msg
from geode.protocol.envelope import Envelope
from geode.tools.approvals import ApprovalGate
from geode.tools.spec import ApprovalMode, SafetyPolicy, ToolCall, ToolContext, ToolSpec
from tests.control.harness import Client, ScriptedWorker, Tree
from tests.waiting import poll_for


def tools(w: ScriptedWorker) -> list[str]:
    return [e.split()[1] for e in w.effects if e.startswith("tool ")]


@pytest.fixture
def tree(tmp_path: Path) -> Iterator[Tree]:
    t = Tree(tmp_path)
    yield t
    t.close()


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _silent(tree: Tree, conn_id: str) -> Client:
    """A connection that never handshakes, only pings: a request first (answered ``ok: false``: it opens a
    slot, as any request does), then casts (a heartbeat of an unknown routing id opens none)."""
    cl = tree.clients[conn_id] = Client(tree.core, conn_id)
    assert cl.request(c.PING).body == {"ok": False}
    tree.core.on_envelope(conn_id, Envelope(kind="cast", type=c.PING, body={}))
    return cl


def test_a_heartbeat_from_an_unknown_routing_id_opens_no_slot(tree: Tree) -> None:
    """A cast ping control has no connection for (a client's heartbeat sent after its ``cli.exit``, or across
    a control restart) is dropped: no slot, nothing to expire 5 s later ('dropped N control connections')."""
    for i in range(50):
        tree.core.on_envelope(f"gone-{i}", Envelope(kind="cast", type=c.PING, body={}))
    assert tree.core.connections() == []
    assert tree.core.tick() == [] and tree.core.dropped_unready == 0
    cli = tree.client("gone-0")  # its handshake still gets in
    assert cli.request(c.PING).body == {"ok": True}


def _approval(cl: Client) -> str:
    ask = cl.wait(lambda f: f.type == c.CLI_EVENT and f.body["kind"] == lanes_msg.APPROVAL_REQUEST)
    return str(ask.body["data"]["approval_id"])


def _done(tree: Tree, turn: str, timeout: float = 5.0) -> None:
    def done() -> bool:
        rec = tree.lanes.records.get_turn(turn)
        return rec is not None and rec.state == "done"

    poll_for(done, timeout, what=f"turn {turn} done")


# --- finding 5: slots -----------------------------------------------------------------------------------


def test_silent_pinging_connections_do_not_lock_out_a_cli(tree: Tree) -> None:
    clock = tree.core.clock = Clock()
    for i in range(MAX_CONNECTIONS + 44):
        _silent(tree, f"silent-{i}")
        clock.now += 0.001
    cli = tree.client("real-cli")  # asserts the handshake is ok (today: overloaded)
    assert cli.request(c.PING).body == {"ok": True}
    assert len(tree.core.connections()) <= MAX_CONNECTIONS


def test_pre_handshake_pings_do_not_keep_a_slot(tree: Tree) -> None:
    clock = tree.core.clock = Clock()
    silent = _silent(tree, "silent")
    for _ in range(12):  # pinging every 0.5 s, well inside the idle timeout
        clock.now += 0.5
        tree.core.on_envelope("silent", Envelope(kind="cast", type=c.PING, body={}))
        tree.core.tick()
    assert clock.now - 1000.0 > tree.core.handshake_deadline_s
    assert "silent" not in {k["id"] for k in tree.core.connections()}
    r = silent.request(c.PING)
    assert r.kind == "error" and r.body["code"] == "not_ready" and "dropped" in r.body["message"]
    tree.core.on_envelope("silent", Envelope(kind="cast", type=c.PING, body={}))
    assert "silent" not in {k["id"] for k in tree.core.connections()}  # pings alone never come back in
    r = silent.request(c.HANDSHAKE, {"protocol_version": c.CONTROL_PROTOCOL})
    assert r.kind == "ok"  # a handshake does (a CLI idle across a control restart re-attaches)
    ready = tree.client("ready")
    clock.now += tree.core.handshake_deadline_s * 3
    for _ in range(10):
        ready.request(c.PING)
        clock.now += 1.0
        tree.core.tick()
    assert "ready" in {k["id"] for k in tree.core.connections()}  # a handshaken client keeps its slot


def test_full_table_evicts_the_oldest_silent_connection_first(tree: Tree) -> None:
    clock = tree.core.clock = Clock()
    tree.core.max_connections = 4
    ready = tree.client("ready")
    for i in range(3):
        _silent(tree, f"s{i}")
        clock.now += 0.1
    tree.client("late")  # full: s0 (oldest silent) goes, never the handshaken one
    ids = {k["id"] for k in tree.core.connections()}
    assert ids == {"ready", "s1", "s2", "late"}
    assert ready.request(c.PING).body == {"ok": True}


def test_failed_handshakes_do_not_hold_slots_either(tree: Tree) -> None:
    clock = tree.core.clock = Clock()
    tree.core.max_connections = 3
    for i in range(3):
        bad = tree.clients[f"bad{i}"] = Client(tree.core, f"bad{i}")
        assert bad.request(c.HANDSHAKE, {"protocol_version": "geode.control.v0"}).kind == "error"
        clock.now += 0.1
    tree.client("real")  # evicts the oldest failed one
    clock.now += tree.core.handshake_deadline_s + 0.1
    tree.core.tick()
    assert {k["id"] for k in tree.core.connections()} == {"real"}


def test_handshake_without_cwd_uses_the_home_workspace(tree: Tree) -> None:
    cl = tree.clients["nocwd"] = Client(tree.core, "nocwd")
    r = cl.request(c.HANDSHAKE, {"protocol_version": c.CONTROL_PROTOCOL})
    ws = tree.home.root / "workspace"
    assert r.kind == "ok" and r.body["workspace"] == str(ws.resolve())
    assert stat.S_IMODE(ws.stat().st_mode) == 0o700


# --- finding 6: authority belongs to the turn -----------------------------------------------------------


def test_a_skip_connection_attached_to_another_session_does_not_approve_it(tree: Tree) -> None:
    w = ScriptedWorker(tree.reg)
    w.ready()
    a = tree.client("a")
    sid = a.session_id  # type: ignore[attr-defined]
    b = tree.client("b", dangerously_skip_permissions=True, session_id=sid)
    assert b.request(c.ATTACH, {"session_id": sid, "after_seq": 0}).kind == "ok"
    turn = a.request(c.PROMPT, {"text": "approve:write_file"}).body["turn_id"]
    aid = _approval(a)
    _approval(b)  # b sees the prompt too ...
    threading.Event().wait(0.2)  # a window for a wrong auto-approval: the assertion is that none happens
    assert tools(w) == []  # ... but its flag does not answer it (today: auto-approved)
    assert [p["approval_id"] for p in tree.lanes.desk.pending()] == [aid]
    assert a.request(c.APPROVAL_RESPONSE, {"approval_id": aid, "decision": "n"}).kind == "ok"
    a.wait_done(turn)
    assert tools(w) == []


def test_the_skip_flag_is_stored_in_the_turn_and_survives_a_control_restart(tree: Tree) -> None:
    w = ScriptedWorker(tree.reg)
    w.ready()
    a = tree.client("a", dangerously_skip_permissions=True)
    turn = a.request(c.PROMPT, {"text": "sleep:0.3"}).body["turn_id"]
    rec = tree.lanes.records.get_turn(turn)
    assert rec is not None and rec.settings["skip_permissions"] is True
    plain = tree.client("plain")
    t2 = plain.request(c.PROMPT, {"text": "sleep:0"}).body["turn_id"]
    rec2 = tree.lanes.records.get_turn(t2)
    assert rec2 is not None and rec2.settings["skip_permissions"] is False
    tree.start_control()  # a new control incarnation knows no connection; the turn keeps its flag
    _done(tree, turn)
    assert [r.settings.get("skip_permissions") for r in w.runs if r.turn_id == turn] == [True]


def test_the_gate_approves_a_skipping_turn_itself_and_only_where_a_person_could_answer() -> None:
    asked: list[str] = []

    class Channel:
        def request(self, ctx, tool_name, detail, safety):  # type: ignore[no-untyped-def]
            asked.append(tool_name)
            return "n"

    gate = ApprovalGate(Channel())
    spec = ToolSpec(
        name="write_file",
        description="w",
        handler="builtin:write_file",
        policy=SafetyPolicy(
            effect="mutate", approval=ApprovalMode.PER_INVOCATION, resource_strategy="file_path"
        ),
    )
    ctx = dict(session_id="s", turn_id="t", step_id="t:step-1", operation_id="op")
    v = gate.decide(ToolContext(**ctx, mode="IPC", skip_permissions=True), spec, "x")
    assert (v.granted, v.how, asked) == (True, "skip_permissions", [])
    v = gate.decide(ToolContext(**ctx, mode="DAEMON", skip_permissions=True), spec, "x")
    assert not v.granted and v.how == "no_person"
    v = gate.decide(ToolContext(**ctx, mode="IPC"), spec, "x")
    assert not v.granted and asked == ["write_file"]
    snap = dict(session_id="s", turn_id="t", step_index=1, round_index=1, model="m", provider="p", adapter="")
    call = ToolCall(id="tu1", name="write_file")
    ipc = StepSnapshot(**snap, mode="IPC", skip_permissions=True)
    headless = StepSnapshot(**snap, mode="HEADLESS", skip_permissions=True)
    assert ipc.tool_context(call).skip_permissions and not headless.tool_context(call).skip_permissions


# --- finding 9: who may answer an approval --------------------------------------------------------------


def test_only_a_connection_the_approval_was_delivered_to_can_answer_it(tree: Tree) -> None:
    w = ScriptedWorker(tree.reg)
    w.ready()
    a = tree.client("a")
    b = tree.client("b")  # another session, not attached to a's
    turn = a.request(c.PROMPT, {"text": "approve:write_file"}).body["turn_id"]
    aid = _approval(a)
    r = b.request(c.APPROVAL_RESPONSE, {"approval_id": aid, "decision": "y"})
    assert r.kind == "error" and r.body["code"] == "not_found" and "not pending" in r.body["message"]
    threading.Event().wait(0.2)  # a window for a wrongly accepted answer: the assertion is that none runs
    assert tools(w) == [] and [p["approval_id"] for p in tree.lanes.desk.pending()] == [aid]
    assert a.request(c.APPROVAL_RESPONSE, {"approval_id": aid, "decision": "y"}).kind == "ok"
    a.wait_done(turn)
    assert tools(w) == ["write_file"]
    again = a.request(c.APPROVAL_RESPONSE, {"approval_id": aid, "decision": "y"})
    assert again.kind == "error"  # answered once: no longer pending anywhere
