"""Issue 12, finding B, on a real `geode serve` tree: a turn submitted with --dangerously-skip-permissions
keeps that authority while control (or lanes) is SIGKILLed just before its run_bash call reaches approval
(the scripted model holds its tool-call reply until the test has killed the child, so the order is fixed);
and a denial nobody made (no one attached to ask, the asker's control died) is reported as such, never as
"User denied"."""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from actors.cli.client import ControlClient
from actors.tree.client import client_bus
from geode.home import GeodeHome
from geode.protocol import control as c
from geode.protocol import lanes as lanes_msg
from geode.protocol.errors import GeodeError
from geode.testing.scripted import ScriptedServer
from tests.actors.tree_kit import scripted_tree, status_children, tool_results, wait_children
from tests.waiting import poll_for


class Gates:
    """One event per marker word: the model's tool-call reply for that word waits until it is set."""

    def __init__(self) -> None:
        self._mu = threading.Lock()
        self._gates: dict[str, threading.Event] = {}

    def gate(self, word: str) -> threading.Event:
        with self._mu:
            return self._gates.setdefault(word, threading.Event())


def _text(content: Any) -> str:
    return content if isinstance(content, str) else " ".join(b.get("text", "") for b in content or [])


def _reply(ws: Path, gates: Gates):  # type: ignore[no-untyped-def]
    def reply(req: Any) -> Any:
        msgs = req.body.get("messages", []) if isinstance(req.body, dict) else []
        last = (msgs[-1] if msgs else {}).get("content")
        if isinstance(last, list) and any(b.get("type") == "tool_result" for b in last):
            return {"text": "ran it"}
        word = _text(last).split()[-1]
        if not gates.gate(word).wait(60):
            return {"text": "gate never opened"}
        cmd = f"echo {word} >> {ws / (word + '.marker')}"
        return {"tool_calls": [{"name": "run_bash", "input": {"command": cmd}}]}

    return reply


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[GeodeHome, ScriptedServer, Path, Gates]]:
    base = tmp_path_factory.mktemp("skipchaos")
    ws = base / "ws"
    ws.mkdir()
    gates = Gates()
    with scripted_tree(base, _reply(ws, gates), ws, cwd=ws) as (home, server):
        yield home, server, ws, gates


def _asked(server: ScriptedServer, word: str) -> bool:
    return any(word in _text((rq.body.get("messages") or [{}])[-1].get("content")) for rq in server.requests)


def _turn_record(home: GeodeHome, turn_id: str) -> dict[str, Any] | None:
    try:
        with client_bus(home) as bus:
            rec = bus.transport.call("lanes", lanes_msg.TURN, {"turn_id": turn_id}, timeout_s=2.0)
    except GeodeError:
        return None
    return rec if rec and rec.get("state") == "done" else None


def _run(tree: tuple[GeodeHome, ScriptedServer, Path, Gates], child: str, word: str) -> dict[str, Any]:
    home, server, ws, gates = tree
    cl = ControlClient(home)
    cl.connect(cwd=str(ws), is_tty=True, dangerously_skip_permissions=True)
    try:
        turn = cl.request(c.PROMPT, {"text": f"please run {word}"})["turn_id"]
    finally:
        cl.close()
    poll_for(lambda: _asked(server, word), 30, what="the model call of the turn")
    pid = int(status_children(home)[child]["pid"])
    os.kill(pid, signal.SIGKILL)  # the model answers run_bash only after this
    gates.gate(word).set()
    wait_children(home, lambda k: k[child].pid not in (None, pid) and k[child].state == "running", 30)
    rec = poll_for(lambda: _turn_record(home, turn), 60, what=f"turn {turn} done", swallow=(GeodeError,))
    return rec


@pytest.mark.parametrize("child", ["control", "lanes"])
def test_skip_flag_survives_a_child_kill_before_approval(
    tree: tuple[GeodeHome, ScriptedServer, Path, Gates], child: str
) -> None:
    _, server, ws, _ = tree
    word = f"mark{child}"
    rec = _run(tree, child, word)
    outcome = rec["outcome"] or {}
    assert outcome.get("termination_reason") == "natural", outcome
    results = [
        b
        for rq in server.requests
        for m in rq.body.get("messages", [])
        if isinstance(m.get("content"), list)
        for b in m["content"]
        if b.get("type") == "tool_result" and word in str(rq.body["messages"][0])
    ]
    assert results and not any(b.get("is_error") for b in results), results  # today: "User denied"
    assert (ws / f"{word}.marker").read_text().split() == [word]  # the effect ran, once


def _wait_pending(home: GeodeHome) -> None:
    def pending() -> bool:
        with client_bus(home) as bus:
            st = bus.transport.call("lanes", lanes_msg.LANES_STATUS, {}, timeout_s=2.0)
        return int(st.get("pending_approvals", 0)) > 0

    poll_for(pending, 30, what="a pending approval", swallow=(GeodeError,))


def test_an_approval_with_nobody_attached_is_denied_as_no_origin(
    tree: tuple[GeodeHome, ScriptedServer, Path, Gates],
) -> None:
    home, server, ws, gates = tree
    gates.gate("nobodyword").set()
    cl = ControlClient(home)
    cl.connect(cwd=str(ws), is_tty=True)
    turn = cl.request(c.PROMPT, {"text": "please run nobodyword"})["turn_id"]
    cl.close()  # nobody is attached when the approval is asked
    rec = poll_for(lambda: _turn_record(home, turn), 60, what=f"turn {turn} done", swallow=(GeodeError,))
    assert (rec["outcome"] or {}).get("termination_reason") == "natural", rec["outcome"]
    assert not (ws / "nobodyword.marker").exists()
    results = tool_results(server, "nobodyword")
    assert results and all("User denied" not in r for r in results), results  # today: "User denied"
    assert any("Nobody was there to approve" in r for r in results), results


def test_an_approval_whose_control_dies_is_denied_as_a_disconnect(
    tree: tuple[GeodeHome, ScriptedServer, Path, Gates],
) -> None:
    home, server, ws, gates = tree
    gates.gate("goneword").set()
    cl = ControlClient(home)
    cl.connect(cwd=str(ws), is_tty=True)
    try:
        turn = cl.request(c.PROMPT, {"text": "please run goneword"})["turn_id"]
        _wait_pending(home)  # the approval is pending at lanes, delivered to this attached client
        pid = int(status_children(home)["control"]["pid"])
        os.kill(pid, signal.SIGKILL)
    finally:
        cl.close()
    rec = poll_for(lambda: _turn_record(home, turn), 60, what=f"turn {turn} done", swallow=(GeodeError,))
    assert (rec["outcome"] or {}).get("termination_reason") == "natural", rec["outcome"]
    assert not (ws / "goneword.marker").exists()
    results = tool_results(server, "goneword")
    assert results and all("User denied" not in r for r in results), results  # today: "User denied"
    assert any("approver disconnected" in r for r in results), results
