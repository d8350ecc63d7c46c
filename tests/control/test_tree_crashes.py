"""Crashes inside a real `geode serve` tree (supervisor restarts, child_died to lanes), scripted provider:
SIGKILL the loop worker running a turn → the turn resumes elsewhere and completes once; SIGKILL control
mid-turn → the supervisor restarts it and the CLI re-attaches and receives the rest."""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from actors.cli.client import ControlClient
from geode.home import GeodeHome
from geode.protocol import control as c
from geode.protocol import lanes as lanes_msg
from geode.testing.scripted import ScriptedServer
from tests.actors.tree_kit import scripted_tree, serve, status_children
from tests.waiting import poll_for

CAP_ONE = "[lanes]\nglobal_cap = 1\n"


def _slow_reply(req: Any) -> Any:
    return {"text": "the slow answer arrives", "delay_s": 2.0}


def _text(content: Any) -> str:
    """A message's content as plain text (a string, or the text of its blocks)."""
    return content if isinstance(content, str) else " ".join(b.get("text", "") for b in content or [])


def _echo_reply(req: Any) -> Any:
    return {"text": f"done {_text(req.body['messages'][-1]['content'])}", "delay_s": 1.0}


def _asked(server: ScriptedServer) -> list[str]:
    """The last user text of every model call the scripted server received."""
    return [_text(rq.body["messages"][-1]["content"]) for rq in server.requests]


@pytest.fixture
def tree(tmp_path: Path) -> Iterator[tuple[GeodeHome, ScriptedServer]]:
    with scripted_tree(tmp_path, _slow_reply) as (home, server):
        yield home, server


def _pid(home: GeodeHome, name: str) -> int:
    return int(status_children(home)[name]["pid"])


def _run_in_thread(cl: ControlClient, text: str, events: list[dict]) -> tuple[threading.Thread, dict]:
    res: dict = {}
    th = threading.Thread(
        target=lambda: res.update(cl.run_prompt(text, on_event=events.append, timeout_s=60))
    )
    th.start()
    return th, res


def _wait_kind(events: list[dict], kind: str, timeout: float = 15.0) -> dict:
    hit = poll_for(lambda: [e for e in events if e["kind"] == kind], timeout, what=f"a {kind} event")
    return hit[0]


def _submit_three(home: GeodeHome) -> tuple[list[ControlClient], list[str]]:
    """Three clients, each with its own session, each submitting one prompt (job0..job2)."""
    clients = [ControlClient(home) for _ in range(3)]
    for cl in clients:
        cl.connect()
    turns = [
        cl.request(c.PROMPT, {"text": f"job{i}", "session_id": cl.session_id})["turn_id"]
        for i, cl in enumerate(clients)
    ]
    return clients, turns


def _follow_all(clients: list[ControlClient], turns: list[str]) -> dict:
    """Follow every client's turn concurrently to its end; the results by turn id."""
    results: dict = {}
    ths = [
        threading.Thread(target=lambda cl=cl, t=t: results.update({t: cl.follow(t, timeout_s=60)}))
        for cl, t in zip(clients, turns, strict=True)
    ]
    for th in ths:
        th.start()
    for th in ths:
        th.join(70)
    return results


def test_sigkill_loop_worker_mid_turn_resumes_and_completes_once(
    tree: tuple[GeodeHome, ScriptedServer],
) -> None:
    home, server = tree
    cl = ControlClient(home)
    cl.connect()
    events: list[dict] = []
    th, res = _run_in_thread(cl, "answer slowly", events)
    started = _wait_kind(events, lanes_msg.TURN_STARTED)
    poll_for(lambda: server.requests, 15, what="the model call in flight on that worker")  # 2 s reply
    os.kill(_pid(home, started["data"]["worker"]), signal.SIGKILL)
    th.join(60)
    cl.close()
    assert res.get("termination_reason") == "natural", res
    assert res["text"] == "the slow answer arrives"
    done = [e for e in events if e["kind"] == lanes_msg.TURN_DONE]
    starts = [e for e in events if e["kind"] == lanes_msg.TURN_STARTED]
    assert len(done) == 1 and len(starts) == 2 and starts[1]["data"]["resume"] is True


def test_sigkill_control_mid_turn_cli_reattaches(tree: tuple[GeodeHome, ScriptedServer]) -> None:
    home, _server = tree
    cl = ControlClient(home)
    cl.connect()
    events: list[dict] = []
    th, res = _run_in_thread(cl, "answer slowly", events)
    _wait_kind(events, lanes_msg.TURN_STARTED)
    os.kill(_pid(home, "control"), signal.SIGKILL)  # the supervisor restarts it with a new incarnation
    th.join(60)
    cl.close()
    assert res.get("termination_reason") == "natural", res
    assert cl.reattached >= 1
    assert len([e for e in events if e["kind"] == lanes_msg.TURN_DONE]) == 1


def test_cancel_a_real_turn_keeps_completed_effects_and_the_session(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()

    def reply(req: Any) -> Any:
        msgs = req.body.get("messages", []) if isinstance(req.body, dict) else []
        results = sum(
            1
            for m in msgs
            if isinstance(m.get("content"), list)
            for b in m["content"]
            if b.get("type") == "tool_result"
        )
        last = msgs[-1].get("content") if msgs else ""
        if "hello" in _text(last):
            return {"text": "hi again"}
        if results == 0:
            return {
                "tool_calls": [
                    {"name": "write_file", "input": {"file_path": str(ws / "a.txt"), "content": "A"}}
                ]
            }
        if results == 1:
            return {"tool_calls": [{"name": "run_bash", "input": {"command": "sleep 20", "timeout": 60}}]}
        return {"text": "finished"}

    with scripted_tree(tmp_path, reply, ws) as (home, _server):
        cl = ControlClient(home)
        cl.connect(cwd=str(ws), dangerously_skip_permissions=True)
        events: list[dict] = []
        th, res = _run_in_thread(cl, "do the work", events)
        bash_started = lambda: any(  # noqa: E731
            e["kind"] == "tool_start" and e["data"].get("name") == "run_bash" for e in events
        )
        poll_for(bash_started, 15, what="run_bash started")
        turn_id = events[0]["turn_id"]
        other = ControlClient(home)
        other.connect(session_id=cl.session_id)
        assert other.cancel(turn_id)["state"] == "cancellation_requested"
        th.join(30)
        assert res.get("termination_reason") == "user_cancelled", res
        assert (ws / "a.txt").read_text() == "A"  # a completed effect stays
        again = other.run_prompt("hello", timeout_s=30)  # the session is resumable
        assert again["termination_reason"] == "natural" and again["text"] == "hi again"
        other.close()
        cl.close()


def test_sigkill_lanes_in_the_tree_loses_and_duplicates_nothing(tmp_path: Path) -> None:
    with scripted_tree(tmp_path, _echo_reply, extra=CAP_ONE) as (home, server):
        clients, turns = _submit_three(home)
        poll_for(lambda: _asked(server), 15, what="the first job's model call")  # cap 1: the others queue
        os.kill(_pid(home, "lanes"), signal.SIGKILL)  # the supervisor restarts lanes
        results = _follow_all(clients, turns)
        assert sorted(results) == sorted(turns)
        assert [results[t]["text"] for t in turns] == ["done job0", "done job1", "done job2"]
        assert sorted(_asked(server)) == ["job0", "job1", "job2"]  # each ran exactly once
        for cl in clients:
            cl.close()


def test_whole_tree_sigkilled_and_restarted_loses_nothing(tmp_path: Path) -> None:
    from actors.tree.client import tree_status
    from actors.tree.instance_lock import InstanceLock

    with scripted_tree(tmp_path, _echo_reply, extra=CAP_ONE) as (home, server):
        clients, turns = _submit_three(home)
        poll_for(lambda: _asked(server), 15, what="the first job's model call")  # cap 1: the others queue
        st = tree_status(home)
        assert st is not None
        os.kill(st.pid, signal.SIGKILL)  # the supervisor: every child dies with it
        poll_for(lambda: not InstanceLock(home.lock_file).is_held(), 10, what="the instance lock released")
        serve(home)  # a fresh tree: new incarnations everywhere
        results = _follow_all(clients, turns)
        assert [results.get(t, {}).get("text") for t in turns] == ["done job0", "done job1", "done job2"]
        asked = _asked(server)
        assert asked.count("job1") == 1 and asked.count("job2") == 1  # queued turns ran exactly once
        assert 1 <= asked.count("job0") <= 2  # the interrupted model call is made again on resume
        for cl in clients:
            cl.close()
