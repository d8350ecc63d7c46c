"""A real `geode serve` tree: delegate_task runs the task as a child turn (its own session, fewer tools) and
the parent's next model request carries the child's answer; an approval inside the child reaches the parent's
connection; cancelling the parent cancels the child; send_message says plainly that no messenger platform
is enabled."""

from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from actors.bus import Bus
from actors.cli.client import ControlClient
from geode.home import GeodeHome
from geode.protocol import lanes as lanes_msg
from geode.sessions.factory import create_session
from geode.testing.scripted import ScriptedServer
from tests.actors.tree_kit import geode, scripted_tree, tool_results, wait_for


@dataclass
class Rig:
    home: GeodeHome
    model: ScriptedServer
    ws: Path


def _text(msg: dict[str, Any]) -> str:
    content = msg.get("content")
    if isinstance(content, str):
        return content
    return " ".join(b.get("text", "") for b in content or [] if isinstance(b, dict))


def _has_result(msg: dict[str, Any]) -> bool:
    content = msg.get("content")
    return isinstance(content, list) and any(b.get("type") == "tool_result" for b in content)


def _reply(ws: Path):  # type: ignore[no-untyped-def]
    def reply(req: Any) -> Any:
        msgs = req.body.get("messages", []) if isinstance(req.body, dict) else []
        first, last = _text(msgs[0]), msgs[-1]
        if first.startswith("CHILD:"):  # the sub-agent's conversation: its first message is the task
            if _has_result(last):
                return {"text": "CHILD-ANSWER wrote it"}
            if "slow" in first:  # answers long after the test cancels the parent
                return {"text": "too late", "delay_s": 60}
            if "write" in first:
                path = str(ws / "by-child.txt")
                return {"tool_calls": [{"name": "write_file", "input": {"file_path": path, "content": "c"}}]}
            return {"text": "CHILD-ANSWER pong"}
        if first.startswith("PARENT:"):
            if _has_result(last):
                return {"text": "parent done"}
            task = "CHILD:" + first.removeprefix("PARENT:")
            return {"tool_calls": [{"name": "delegate_task", "input": {"task": task, "timeout_s": 60}}]}
        if first.startswith("SEND:"):
            if _has_result(last):
                return {"text": "send done"}
            call = {"channel": "slack:C1", "recipient": "U1", "text": "hello"}
            return {"tool_calls": [{"name": "send_message", "input": call}]}
        return {"text": "?"}

    return reply


@pytest.fixture(scope="module")
def rig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Rig]:
    base = tmp_path_factory.mktemp("delegate")
    ws = base / "ws"
    ws.mkdir()
    with scripted_tree(base, _reply(ws), ws, cwd=ws) as (home, model):
        yield Rig(home, model, ws)


def _requests(model: ScriptedServer, prefix: str) -> list[dict[str, Any]]:
    out = []
    for r in model.requests:
        msgs = r.body.get("messages", []) if isinstance(r.body, dict) else []
        if msgs and _text(msgs[0]).startswith(prefix):
            out.append(r.body)
    return out


def _tools(body: dict[str, Any]) -> set[str]:
    return {t.get("name", "") for t in body.get("tools") or []}


def test_delegate_task_returns_the_child_answer(rig: Rig) -> None:
    r = geode(rig.home, "ask", "PARENT: say pong", "--json", cwd=rig.ws, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert json.loads(r.stdout)["text"] == "parent done"
    child = _requests(rig.model, "CHILD: say pong")
    assert child, "the child turn never asked the model"
    assert "delegate_task" not in _tools(child[0]) and "run_bash" not in _tools(child[0])
    assert {"delegate_task", "run_bash"} <= _tools(_requests(rig.model, "PARENT: say pong")[0])
    [result] = tool_results(rig.model, "PARENT: say pong")
    body = json.loads(json.loads(result)["content"])
    assert body["text"] == "CHILD-ANSWER pong" and body["termination_reason"] == "natural", body
    sid = body["session_id"]
    assert sid.startswith("s-sub-") and body["turn_id"] == "t-sub-" + sid.removeprefix("s-sub-")
    sessions = geode(rig.home, "sessions", cwd=rig.ws, timeout=30)
    assert sessions.returncode == 0, sessions.stderr
    assert sid in sessions.stdout, sessions.stdout


def test_an_approval_inside_the_child_reaches_the_parent_connection(rig: Rig) -> None:
    asked: list[dict[str, Any]] = []

    def on_approval(data: dict[str, Any]) -> str:
        asked.append(data)
        assert not (rig.ws / "by-child.txt").exists()  # nothing ran before the person answered
        return "y"

    cl = ControlClient(rig.home)
    try:
        cl.connect(cwd=str(rig.ws), is_tty=True)
        out = cl.run_prompt("PARENT: write a file", on_approval=on_approval, timeout_s=120)
    finally:
        cl.close()
    assert out["termination_reason"] == "natural" and out["text"] == "parent done", out
    assert len(asked) == 1 and asked[0]["tool_name"] == "write_file", asked
    assert "[sub-agent s-sub-" in asked[0]["detail"], asked
    assert (rig.ws / "by-child.txt").read_text() == "c"
    [result] = tool_results(rig.model, "PARENT: write a file")
    assert "CHILD-ANSWER wrote it" in result, result


def _sessions(rig: Rig) -> set[str]:
    r = geode(rig.home, "sessions", cwd=rig.ws, timeout=30)
    assert r.returncode == 0, r.stderr
    return set(re.findall(r"s-sub-[0-9a-f]{20}", r.stdout))


def _turn(bus: Bus, turn_id: str) -> dict[str, Any]:
    return bus.transport.call("lanes", lanes_msg.TURN, lanes_msg.TurnQuery(turn_id=turn_id), timeout_s=10)


def test_cancelling_the_parent_cancels_the_child(rig: Rig) -> None:
    before = _sessions(rig)
    sid = f"s-cancel-{uuid.uuid4().hex[:8]}"
    env = {"GEODE_HOME": str(rig.home.root)}
    spec = create_session("IPC", home=rig.home, session_id=sid, workspace=rig.ws, env=env)
    settings = spec.model_dump(mode="json", exclude={"plan"}) | {"session_id": sid}
    bus = Bus("delegate-test", 1, rig.home).start()
    try:
        parent = lanes_msg.Submit(
            turn_id=f"t-{sid}", session_id=sid, mode="IPC", input={"text": "PARENT: slow"}, settings=settings
        )
        bus.transport.call("lanes", lanes_msg.SUBMIT, parent, timeout_s=20)
        wait_for(lambda: _requests(rig.model, "CHILD: slow"), 60, what="the child never asked the model")
        (child_sid,) = wait_for(lambda: _sessions(rig) - before, 30, what="no child session listed")
        child_turn = "t-sub-" + child_sid.removeprefix("s-sub-")
        assert _turn(bus, child_turn)["state"] == "running"
        started = time.monotonic()
        bus.transport.call("lanes", lanes_msg.CANCEL, lanes_msg.Cancel(turn_id=f"t-{sid}"), timeout_s=10)
        done = wait_for(
            lambda: (lambda t: t if t.get("state") == "done" else None)(_turn(bus, child_turn)),
            30,
            what="the child turn was not cancelled with its parent",
        )
        assert time.monotonic() - started < 30  # long before the child's model would have answered
        assert done["outcome"]["termination_reason"] == "user_cancelled", done
        parent_done = wait_for(
            lambda: (lambda t: t if t.get("state") == "done" else None)(_turn(bus, f"t-{sid}")), 30
        )
        assert parent_done["outcome"]["termination_reason"] == "user_cancelled", parent_done
    finally:
        bus.stop()
    assert not [r for r in _requests(rig.model, "PARENT: slow") if _has_result(r["messages"][-1])]


def test_send_message_says_the_platform_is_not_enabled(rig: Rig) -> None:
    # the skip flag answers the prompt an IPC send_message asks (send_rule): the child then refuses it
    skip = "--dangerously-skip-permissions"
    r = geode(rig.home, "ask", "SEND: hello", "--json", skip, cwd=rig.ws, timeout=90)
    assert r.returncode == 0, r.stdout + r.stderr
    [result] = tool_results(rig.model, "SEND: hello")
    assert "slack messenger platform is not enabled" in result and "SLACK_BOT_TOKEN" in result, result
    assert "Nothing was posted" in result, result
    assert "tool_unavailable" in result, result
