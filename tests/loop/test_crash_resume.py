"""Real processes: SIGKILL the loop worker mid-batch; the turn resumes on a new incarnation once."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from actors.bus import Bus
from geode.home import GeodeHome
from geode.protocol import control as c
from geode.providers.scenario import RecordedRequest
from geode.providers.scripted import ScriptedServer
from tests.actors.tree_kit import geode, make_home, stop, wait_children

ALLOW = 'echo \'{\\"hookSpecificOutput\\": {\\"permissionDecision\\": \\"allow\\"}}\''


def _replies(ws: Path):  # type: ignore[no-untyped-def]
    def reply(req: RecordedRequest) -> Any:
        msgs = req.body.get("messages", []) if isinstance(req.body, dict) else []
        last = msgs[-1] if msgs else {}
        content = last.get("content") if isinstance(last, dict) else None
        if isinstance(content, list) and any(b.get("type") == "tool_result" for b in content):
            return {"text": "done"}
        return {
            "tool_calls": [
                {
                    "name": "write_file",
                    "id": "tu_a",
                    "input": {"file_path": str(ws / "a.txt"), "content": "A"},
                },
                {
                    "name": "run_bash",
                    "id": "tu_b",
                    "input": {"command": f"echo B >> {ws / 'log.txt'}; sleep 20", "timeout": 60},
                },
                {
                    "name": "write_file",
                    "id": "tu_c",
                    "input": {"file_path": str(ws / "c.txt"), "content": "C"},
                },
            ]
        }

    return reply


@pytest.fixture
def world(tmp_path: Path) -> Iterator[tuple[GeodeHome, ScriptedServer, Path, Bus]]:
    ws = tmp_path / "ws"
    ws.mkdir()
    server = ScriptedServer(_replies(ws)).start()
    extra = f"""
[providers]
model = "claude-sonnet-5"
[providers.anthropic]
base_url = "{server.base_url}"
[[hooks.PermissionRequest]]
command = "{ALLOW}"
[tools]
roots = ["{ws}"]
"""
    home = make_home(tmp_path, extra.replace("[loop]\nworkers = 2", ""))
    cfg = home.config_file.read_text().replace("workers = 2", "workers = 1\ntool_parallelism = 1")
    home.config_file.write_text(cfg)
    home.env_file.write_text("ANTHROPIC_API_KEY=sk-test-key\n")
    r = geode(home, "serve")
    assert r.returncode == 0, r.stdout + r.stderr
    bus = Bus("testctl", 1, home).start()
    try:
        yield home, server, ws, bus
    finally:
        bus.stop()
        stop(home)
        server.stop()


def _wait(pred, timeout: float = 20.0) -> Any:  # type: ignore[no-untyped-def]
    end, tick = time.monotonic() + timeout, threading.Event()
    while time.monotonic() < end:
        out = pred()
        if out:
            return out
        tick.wait(0.05)
    raise AssertionError("condition not reached in time")


def test_sigkill_mid_batch_resumes_on_new_incarnation(world) -> None:  # type: ignore[no-untyped-def]
    home, server, ws, bus = world
    kids = wait_children(home, lambda k: k.get("loop-1") and k["loop-1"].state == "running")
    first = kids["loop-1"]
    submit = c.Submit(
        turn_id="t-crash",
        session_id="s-crash",
        input={"text": "do three things"},
        settings={"workspace": str(ws)},
    )
    _wait(lambda: _try(lambda: bus.transport.call("lanes", c.SUBMIT, submit, timeout_s=5)))
    _wait(lambda: (ws / "log.txt").exists() and (ws / "a.txt").exists())  # a done, b running, c not sent
    a_mtime = (ws / "a.txt").stat().st_mtime_ns
    os.kill(first.pid, signal.SIGKILL)

    def done() -> dict[str, Any] | None:
        rec = _try(lambda: bus.transport.call("lanes", c.TURN, c.TurnQuery(turn_id="t-crash"), timeout_s=5))
        return rec if rec and rec.get("state") == "done" else None

    rec = _wait(done, timeout=30)
    kids = wait_children(home, lambda k: k["loop-1"].state == "running")
    assert kids["loop-1"].incarnation > first.incarnation
    assert rec["worker"] == "loop-1" and rec["incarnation"] == kids["loop-1"].incarnation
    out = rec["outcome"]
    # b's receipt was still admitted (its handler is running in the executor): uncertain → escalated
    assert out["termination_reason"] == "external_verification_required"
    assert out["pending_text"] == "done"
    assert (ws / "log.txt").read_text() == "B\n"  # b never re-run
    assert (ws / "a.txt").stat().st_mtime_ns == a_mtime  # a replayed from its receipt, not rewritten
    assert (ws / "c.txt").read_text() == "C"  # c never began before the crash: it ran after resume
    final = server.requests[-1].body["messages"]
    uses = [
        b["id"]
        for m in final
        if isinstance(m["content"], list)
        for b in m["content"]
        if b.get("type") == "tool_use"
    ]
    answers = [
        b["tool_use_id"]
        for m in final
        if isinstance(m["content"], list)
        for b in m["content"]
        if b.get("type") == "tool_result"
    ]
    assert sorted(uses) == sorted(answers) == ["tu_a", "tu_b", "tu_c"]


def _try(fn):  # type: ignore[no-untyped-def]
    try:
        return fn()
    except Exception:
        return None
