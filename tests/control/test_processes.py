"""Acceptance through real processes: store, lanes, control children, scripted workers, the real socket."""

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
    p = Procs(tmp_path, "[lanes]\nglobal_cap = 2\n[control]\nidle_timeout_s = 2.0\n")
    yield p
    p.close()


def test_prompt_round_trip_and_socket_permissions(procs: Procs) -> None:
    procs.up("loop-1")
    mode = procs.home.cli_socket.stat().st_mode & 0o777
    assert mode == 0o600 and procs.home.cli_socket.parent.stat().st_mode & 0o777 == 0o700
    cl = procs.client()
    events: list[dict] = []
    result = cl.run_prompt("hello", on_event=events.append, timeout_s=10)
    cl.close()
    assert result["termination_reason"] == "natural" and result["text"] == "answer to hello"
    kinds = [e["kind"] for e in events]
    assert kinds[0] == lanes_msg.TURN_QUEUED and kinds[-1] == lanes_msg.TURN_DONE and "text_delta" in kinds


def _timed_prompt(procs: Procs, text: str, out: dict, key: str, **hs) -> None:  # type: ignore[no-untyped-def]
    cl = procs.client(**hs)
    t0 = time.monotonic()
    res = cl.run_prompt(text, timeout_s=20)
    out[key] = (t0, time.monotonic(), res, cl.session_id)
    cl.close()


def test_two_clients_different_sessions_run_concurrently(procs: Procs) -> None:
    procs.up("loop-1", "loop-2")
    out: dict = {}
    ths = [threading.Thread(target=_timed_prompt, args=(procs, "sleep:1.0", out, k)) for k in "ab"]
    t0 = time.monotonic()
    for th in ths:
        th.start()
    for th in ths:
        th.join(20)
    assert time.monotonic() - t0 < 1.9  # both ran at once (serially it would take ≥ 2 s)
    assert out["a"][3] != out["b"][3] and all(v[2]["termination_reason"] == "natural" for v in out.values())


def test_two_prompts_on_one_session_serialize(procs: Procs) -> None:
    procs.up("loop-1", "loop-2")
    first = procs.client()
    sid = first.session_id
    out: dict = {}
    th = threading.Thread(
        target=_timed_prompt, args=(procs, "sleep:0.8", out, "b"), kwargs={"session_id": sid}
    )
    t0 = time.monotonic()
    th.start()
    a = first.run_prompt("sleep:0.8", timeout_s=20)
    th.join(20)
    first.close()
    assert a is not None and out["b"][3] == sid
    assert time.monotonic() - t0 >= 1.6  # one after the other on the session lane
    runs = [ln for ln in procs.effect_lines() if ln.startswith("run ")]
    assert len(runs) == 2


def test_global_cap_holds_across_cli_and_a_second_entry_path(procs: Procs) -> None:
    procs.up("loop-1", "loop-2", "loop-3")  # three free workers, cap 2
    out: dict = {}
    ths = [threading.Thread(target=_timed_prompt, args=(procs, "sleep:0.6", out, k)) for k in "ab"]
    for th in ths:
        th.start()
    # a second entry path (as a messenger poller would) submits straight to lanes
    sub = lanes_msg.Submit(
        turn_id="gw-1", session_id="s-gw-1", mode="DAEMON", origin="messengers", input={"text": "sleep:0.6"}
    )
    procs.bus.transport.call("lanes", lanes_msg.SUBMIT, sub)
    peak = 0
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        st = procs.lanes_status()["lanes"]
        peak = max(peak, st["running"])
        if not st["running"] and not st["queued"] and len(out) == 2:
            break
        time.sleep(0.02)
    for th in ths:
        th.join(10)
    assert peak == 2
    assert len([ln for ln in procs.effect_lines() if ln.startswith("run ")]) == 3


def test_approval_round_trip_through_the_socket(procs: Procs) -> None:
    procs.up("loop-1")
    cl = procs.client()
    seen: list[dict] = []

    def answer(decision: str):  # type: ignore[no-untyped-def]
        def on_approval(data: dict) -> str:
            seen.append(data)
            assert len([ln for ln in procs.effect_lines() if ln.startswith("tool ")]) <= 1  # not yet run
            return decision

        return on_approval

    r_yes = cl.run_prompt("approve:write_file", on_approval=answer("y"), timeout_s=10)
    r_no = cl.run_prompt("approve:run_bash", on_approval=answer("n"), timeout_s=10)
    tools = [ln.split()[1] for ln in procs.effect_lines() if ln.startswith("tool ")]
    assert tools == ["write_file"] and len(seen) == 2 and seen[0]["tool_name"] == "write_file"
    assert r_yes["termination_reason"] == r_no["termination_reason"] == "natural"
    # timeout: nobody answers within the approval's deadline → denied
    start = time.monotonic()
    never = lambda data: (time.sleep(1.5), "y")[1]  # noqa: E731 - answers too late
    cl.run_prompt("approve:edit_file:0.5", on_approval=never, timeout_s=10)
    assert time.monotonic() - start < 5
    assert [ln.split()[1] for ln in procs.effect_lines() if ln.startswith("tool ")] == ["write_file"]
    cl.close()


def test_disconnect_while_pending_denies(procs: Procs) -> None:
    procs.up("loop-1")
    cl = procs.client()
    cl.send_request(c.PROMPT, {"text": "approve:write_file:30"})
    poll_for(lambda: procs.lanes_status()["pending_approvals"], 5, what="the approval pending")
    assert procs.lanes_status()["pending_approvals"] == 1
    cl._hb_stop.set()  # the client vanishes: no exit, no heartbeat
    cl._sock.close(0)  # type: ignore[union-attr]
    t0 = time.monotonic()
    gone = lambda: not procs.lanes_status()["pending_approvals"]  # noqa: E731
    poll_for(gone, 8, interval_s=0.05, what="the approval withdrawn")
    assert time.monotonic() - t0 < 5  # heartbeat loss (2 s) denied it, not the 30 s approval timeout
    idle = lambda: (st := procs.lanes_status()["lanes"]) and not st["running"] and not st["queued"]  # noqa: E731
    poll_for(idle, 10, what="the denied turn finished")
    assert not [ln for ln in procs.effect_lines() if ln.startswith("tool ")]


def test_cancel_running_turn_keeps_effects_and_session(procs: Procs) -> None:
    procs.up("loop-1")
    cl = procs.client()
    started = threading.Event()
    turn: dict = {}

    def on_event(ev: dict) -> None:
        if ev["kind"] == "round_start":
            turn["id"] = ev["turn_id"]
            started.set()

    res: dict = {}
    th = threading.Thread(target=lambda: res.update(cl.run_prompt("slow", on_event=on_event, timeout_s=15)))
    th.start()
    assert started.wait(5)
    canceller = procs.client(session_id=cl.session_id)
    assert canceller.cancel(turn["id"])["state"] == "cancellation_requested"
    th.join(10)
    assert res["termination_reason"] == "user_cancelled"
    assert any(ln.startswith("first-effect") for ln in procs.effect_lines())  # completed effects stay
    again = canceller.run_prompt("hello", timeout_s=10)  # the session is resumable
    assert again["termination_reason"] == "natural"
    canceller.close()
    cl.close()
