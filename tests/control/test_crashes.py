"""SIGKILL control, a loop worker, or lanes mid-turn: nothing is lost, nothing runs twice, the CLI follows."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from geode.protocol import control as c
from geode.protocol import lanes as lanes_msg
from tests.control.procs import Procs
from tests.waiting import poll_for


@pytest.fixture
def procs(tmp_path: Path) -> Iterator[Procs]:
    p = Procs(tmp_path, "[lanes]\nglobal_cap = 4\n")
    yield p
    p.close()


def _runs(procs: Procs, turn_id: str) -> list[str]:
    return [ln for ln in procs.effect_lines() if ln.startswith(f"run {turn_id} ")]


def test_sigkill_control_mid_turn_cli_reattaches_and_gets_the_rest(procs: Procs) -> None:
    procs.up("loop-1")
    cl = procs.client()
    deltas: list[str] = []
    got_some = threading.Event()

    def on_event(ev: dict) -> None:
        if ev["kind"] == "text_delta":
            deltas.append(ev["data"]["text"])
            if len(deltas) == 3:
                got_some.set()

    res: dict = {}
    th = threading.Thread(
        target=lambda: res.update(cl.run_prompt("stream:20:0.1", on_event=on_event, timeout_s=30))
    )
    th.start()
    assert got_some.wait(10)
    procs.kill("control")
    procs.start("control")  # the supervisor's restart: a new incarnation with no connection state
    th.join(30)
    assert res.get("termination_reason") == "natural", procs.logs()
    assert cl.reattached >= 1
    assert deltas == [f"[{i}]" for i in range(20)] + ["answer to stream:20:0.1"]  # all of it, once, in order
    assert len(_runs(procs, res["turn_id"])) == 1
    cl.close()


def test_sigkill_loop_worker_mid_turn_resumes_and_completes_once(procs: Procs) -> None:
    procs.up("loop-1", "loop-2")
    cl = procs.client()
    started: dict = {}
    ev_started = threading.Event()
    dones: list[dict] = []

    def on_event(ev: dict) -> None:
        if ev["kind"] == lanes_msg.TURN_STARTED and "worker" not in started:
            started.update(worker=ev["data"]["worker"], turn=ev["turn_id"])
            ev_started.set()
        if ev["kind"] == lanes_msg.TURN_DONE:
            dones.append(ev)

    res: dict = {}
    th = threading.Thread(
        target=lambda: res.update(cl.run_prompt("sleep:2", on_event=on_event, timeout_s=30))
    )
    th.start()
    assert ev_started.wait(10)
    poll_for(lambda: _runs(procs, started["turn"]), 10, what="the worker running the turn")  # a 2 s turn
    procs.kill(started["worker"])  # the supervisor then reports runtime.child_died to lanes
    th.join(30)
    assert res.get("termination_reason") == "natural", procs.logs()
    runs = _runs(procs, started["turn"])
    other = "loop-2" if started["worker"] == "loop-1" else "loop-1"
    assert runs == [
        f"run {started['turn']} {started['worker']} resume=False",
        f"run {started['turn']} {other} resume=True",
    ]
    assert len(dones) == 1
    cl.close()


def test_sigkill_lanes_queued_turns_neither_lost_nor_run_twice(procs: Procs) -> None:
    procs.up("loop-1")
    clients = [procs.client() for _ in range(3)]
    accepted = [cl.request(c.PROMPT, {"text": "sleep:1.0", "session_id": cl.session_id}) for cl in clients]
    turn_ids = [a["turn_id"] for a in accepted]
    # the first is running on loop-1, two are queued behind the single worker
    one_running = lambda: (st := procs.lanes_status()["lanes"])["running"] == 1 and st["queued"] == 2  # noqa: E731
    started = lambda: one_running() and any(_runs(procs, t) for t in turn_ids)  # noqa: E731
    poll_for(started, 10, what="one turn running on loop-1, two queued")
    procs.kill("lanes", notify=False)
    procs.start("lanes")
    results: dict = {}

    def follow(cl, tid):  # type: ignore[no-untyped-def]
        results[tid] = cl.follow(tid, timeout_s=30)

    ths = [threading.Thread(target=follow, args=(cl, t)) for cl, t in zip(clients, turn_ids, strict=True)]
    for th in ths:
        th.start()
    for th in ths:
        th.join(40)
    assert sorted(results) == sorted(turn_ids), procs.logs()
    assert all(r["termination_reason"] == "natural" for r in results.values())
    for t in turn_ids:
        assert len(_runs(procs, t)) == 1, (t, procs.effect_lines())
    for cl in clients:
        cl.close()


def test_prompt_sent_while_lanes_restarts_is_admitted_once(procs: Procs) -> None:
    procs.up("loop-1")
    cl = procs.client()
    procs.kill("lanes", notify=False)
    res: dict = {}
    th = threading.Thread(target=lambda: res.update(cl.run_prompt("hello", timeout_s=30)))
    th.start()
    time.sleep(0.5)  # a window in which lanes is down while the prompt is sent (nothing to wait on)
    procs.start("lanes")
    th.join(30)
    assert res.get("termination_reason") == "natural", procs.logs()
    assert len(_runs(procs, res["turn_id"])) == 1
    cl.close()
