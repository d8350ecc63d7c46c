"""Issue 12, finding A, on a real `geode serve` tree: the loop worker running a turn is SIGKILLed twice; the
turn keeps its place ahead of a later turn of another session, its age and re-queue count show in
`lanes.status` and `geode status`, and it finishes (natural) before the later turn starts. With
`[lanes] max_requeues = 1` the second loss ends it `worker_lost` instead."""

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
from tests.actors.tree_kit import geode, scripted_tree, status_children
from tests.waiting import poll_for

KILLS = 2


def _text(content: Any) -> str:
    return content if isinstance(content, str) else " ".join(b.get("text", "") for b in content or [])


Tree = tuple[GeodeHome, ScriptedServer, threading.Event]


def _tree(tmp_path: Path, extra: str) -> Iterator[Tree]:
    gate = threading.Event()

    def reply(req: Any) -> Any:
        if "first" in _text(req.body["messages"][-1]["content"]):
            gate.wait(60)  # held until the test has killed its worker KILLS times
        return {"text": "answered"}

    try:
        with scripted_tree(tmp_path, reply, extra=f"[lanes]\nglobal_cap = 1\n{extra}") as (home, server):
            yield home, server, gate
    finally:
        gate.set()


@pytest.fixture
def tree(tmp_path: Path) -> Iterator[Tree]:
    yield from _tree(tmp_path, "")


@pytest.fixture
def bounded_tree(tmp_path: Path) -> Iterator[Tree]:
    yield from _tree(tmp_path, "max_requeues = 1\n")


def _kill_running(home: GeodeHome, server: ScriptedServer, turn_id: str, attempt: int) -> None:
    """SIGKILL the loop worker running ``attempt`` of the turn, once it is inside the model call."""
    row = poll_for(
        lambda: (r := _turn_row(home, turn_id))
        and r["state"] == "running"
        and r["attempts"] == attempt
        and _asked(server, "first") == attempt
        and r,
        30,
        what=f"attempt {attempt} of {turn_id} running",
        swallow=(GeodeError,),
    )
    os.kill(int(status_children(home)[row["worker"]]["pid"]), signal.SIGKILL)


def _lanes(home: GeodeHome, type_: str, body: dict[str, Any]) -> Any:
    with client_bus(home) as bus:
        return bus.transport.call("lanes", type_, body, timeout_s=3.0)


def _turn_row(home: GeodeHome, turn_id: str) -> dict[str, Any] | None:
    rows = _lanes(home, lanes_msg.LANES_STATUS, {}).get("turns") or []
    return next((t for t in rows if t["turn_id"] == turn_id), None)


def _asked(server: ScriptedServer, word: str) -> int:
    return sum(word in _text(rq.body["messages"][-1]["content"]) for rq in server.requests)


def _done(home: GeodeHome, turn_id: str) -> dict[str, Any] | None:
    rec = _lanes(home, lanes_msg.TURN, {"turn_id": turn_id})
    return rec if rec and rec.get("state") == "done" else None


def test_a_turn_whose_worker_keeps_dying_keeps_its_place_and_shows_its_age(
    tree: Tree,
) -> None:
    home, server, gate = tree
    a, b = ControlClient(home), ControlClient(home)
    a.connect()
    b.connect()
    try:
        first = a.request(c.PROMPT, {"text": "the first turn"})["turn_id"]
        poll_for(lambda: _asked(server, "first") == 1, 30, what="the first turn's model call")
        second = b.request(c.PROMPT, {"text": "the second turn"})["turn_id"]  # queued behind the cap
        for n in range(1, KILLS + 1):
            _kill_running(home, server, first, n)
        row = poll_for(
            lambda: (r := _turn_row(home, first))
            and r["state"] == "running"
            and r["attempts"] == KILLS + 1
            and r,
            30,
            what="the first turn running again",
            swallow=(GeodeError,),
        )
        assert row["requeues"] == KILLS and row["age_s"] > 0  # today: lanes.status has no turns
        queued = _turn_row(home, second)
        assert queued is not None and queued["state"] == "queued" and queued["requeues"] == 0
        shown = geode(home, "status").stdout
        assert f"turn {first}" in shown and f"re-queued {KILLS} times" in shown, shown
        gate.set()
        rec_a = poll_for(lambda: _done(home, first), 60, what="the first turn done", swallow=(GeodeError,))
        rec_b = poll_for(lambda: _done(home, second), 60, what="the second turn done", swallow=(GeodeError,))
        assert rec_a["outcome"]["termination_reason"] == "natural"
        assert rec_b["outcome"]["termination_reason"] == "natural"
        assert rec_a["requeues"] == KILLS and rec_a["attempts"] == KILLS + 1
        assert rec_b["attempts"] == 1  # it never started before the first turn finished
        events = _lanes(home, lanes_msg.REPLAY, {"session_id": a.session_id, "after_seq": 0})["events"]
        started = [e["data"] for e in events if e["kind"] == lanes_msg.TURN_STARTED]
        assert [s["requeues"] for s in started] == list(range(KILLS + 1))
    finally:
        gate.set()
        a.close()
        b.close()


def test_a_turn_whose_worker_dies_past_max_requeues_ends_worker_lost(bounded_tree: Tree) -> None:
    home, server, gate = bounded_tree
    a, b = ControlClient(home), ControlClient(home)
    a.connect()
    b.connect()
    try:
        first = a.request(c.PROMPT, {"text": "the first turn"})["turn_id"]
        poll_for(lambda: _asked(server, "first") == 1, 30, what="the first turn's model call")
        second = b.request(c.PROMPT, {"text": "the second turn"})["turn_id"]
        _kill_running(home, server, first, 1)  # re-queued once
        _kill_running(home, server, first, 2)  # the second loss ends it
        rec_a = poll_for(lambda: _done(home, first), 30, what="the first turn done", swallow=(GeodeError,))
        assert rec_a["outcome"]["termination_reason"] == "worker_lost", rec_a["outcome"]
        assert "lost 2 times" in rec_a["outcome"]["error"] and rec_a["attempts"] == 2
        rec_b = poll_for(lambda: _done(home, second), 60, what="the second turn done", swallow=(GeodeError,))
        assert rec_b["outcome"]["termination_reason"] == "natural"  # its lane was freed
        assert _asked(server, "first") == 2  # never a third attempt
    finally:
        gate.set()
        a.close()
        b.close()
