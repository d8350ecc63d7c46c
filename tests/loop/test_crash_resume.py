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
from geode.records.store_client import StoreClient
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


def _start(tmp_path: Path, reply: Any, extra_cfg: str = "") -> tuple[GeodeHome, ScriptedServer, Bus]:
    server = ScriptedServer(reply).start()
    extra = f"""
[providers]
model = "claude-sonnet-5"
[providers.anthropic]
base_url = "{server.base_url}"
[[hooks.PermissionRequest]]
command = "{ALLOW}"
{extra_cfg}
[tools]
roots = ["{tmp_path / "ws"}"]
"""
    home = make_home(tmp_path, extra)
    cfg = home.config_file.read_text().replace("workers = 2", "workers = 1\ntool_parallelism = 1")
    home.config_file.write_text(cfg)
    home.env_file.write_text("ANTHROPIC_API_KEY=sk-test-key\n")
    r = geode(home, "serve")
    assert r.returncode == 0, r.stdout + r.stderr
    return home, server, Bus("testctl", 1, home).start()


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    d = tmp_path / "ws"
    d.mkdir()
    return d


@pytest.fixture
def launch(tmp_path: Path) -> Iterator[Any]:
    started: list[tuple[GeodeHome, ScriptedServer, Bus]] = []

    def go(reply: Any, extra_cfg: str = "") -> tuple[GeodeHome, ScriptedServer, Bus]:
        started.append(_start(tmp_path, reply, extra_cfg))
        return started[-1]

    yield go
    for home, server, bus in started:
        bus.stop()
        stop(home)
        server.stop()


def _submit(bus: Bus, turn: str, session: str, ws: Path) -> None:
    body = c.Submit(turn_id=turn, session_id=session, input={"text": "go"}, settings={"workspace": str(ws)})
    _wait(lambda: _try(lambda: bus.transport.call("lanes", c.SUBMIT, body, timeout_s=5)))


def _done(bus: Bus, turn: str) -> dict[str, Any]:
    def poll() -> dict[str, Any] | None:
        rec = _try(lambda: bus.transport.call("lanes", c.TURN, c.TurnQuery(turn_id=turn), timeout_s=5))
        return rec if rec and rec.get("state") == "done" else None

    return _wait(poll, timeout=30)


def _answered_once(server: ScriptedServer) -> tuple[list[str], list[str]]:
    final = server.requests[-1].body["messages"]
    blocks = [b for m in final if isinstance(m["content"], list) for b in m["content"]]
    uses = [b["id"] for b in blocks if b.get("type") == "tool_use"]
    answers = [b["tool_use_id"] for b in blocks if b.get("type") == "tool_result"]
    return sorted(uses), sorted(answers)


def _wait(pred, timeout: float = 20.0) -> Any:  # type: ignore[no-untyped-def]
    end, tick = time.monotonic() + timeout, threading.Event()
    while time.monotonic() < end:
        out = pred()
        if out:
            return out
        tick.wait(0.05)
    raise AssertionError("condition not reached in time")


def test_sigkill_mid_batch_resumes_on_new_incarnation(launch, ws: Path) -> None:  # type: ignore[no-untyped-def]
    home, server, bus = launch(_replies(ws))
    first = wait_children(home, lambda k: k.get("loop-1") and k["loop-1"].state == "running")["loop-1"]
    _submit(bus, "t-crash", "s-crash", ws)
    _wait(lambda: (ws / "log.txt").exists() and (ws / "a.txt").exists())  # a done, b running, c not sent
    a_mtime = (ws / "a.txt").stat().st_mtime_ns
    os.kill(first.pid, signal.SIGKILL)
    rec = _done(bus, "t-crash")
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
    uses, answers = _answered_once(server)
    assert uses == answers == ["tu_a", "tu_b", "tu_c"]


def test_sigkill_after_pending_batch_saved_runs_the_effect_once(launch, ws: Path) -> None:  # type: ignore[no-untyped-def]
    """Killed while the call waits in a PreToolUse hook (pending batch durable, no receipt yet)."""
    entered, release = ws / "entered", ws / "release"

    def reply(req: RecordedRequest) -> Any:
        last = req.body["messages"][-1]
        if isinstance(last.get("content"), list) and any(
            b.get("type") == "tool_result" for b in last["content"]
        ):
            return {"text": "finished"}
        return {
            "tool_calls": [
                {"name": "run_bash", "id": "tu_x", "input": {"command": f"echo X >> {ws / 'log.txt'}"}}
            ]
        }

    hook = f"sh -c 'echo e >> {entered}; while [ ! -f {release} ]; do sleep 0.05; done; echo {{}}'"
    home, server, bus = launch(
        reply, f'[[hooks.PreToolUse]]\nmatcher = "run_bash"\ncommand = "{hook}"\ntimeout = 60'
    )
    first = wait_children(home, lambda k: k.get("loop-1") and k["loop-1"].state == "running")["loop-1"]
    _submit(bus, "t-pend", "s-pend", ws)
    _wait(lambda: entered.exists())
    store = StoreClient(bus.transport)
    assert store.load_checkpoint("s-pend").state.pending_batch is not None  # write-ahead happened
    assert store.list_receipts(session_id="s-pend") == []  # nothing was admitted: the effect never began
    os.kill(first.pid, signal.SIGKILL)
    # the new incarnation repairs the round: no receipt → the call is sent again, and also waits in the hook
    _wait(lambda: entered.exists() and entered.read_text().count("e") >= 2, timeout=30)
    release.write_text("go")
    rec = _done(bus, "t-pend")
    assert rec["incarnation"] > first.incarnation
    assert (ws / "log.txt").read_text() == "X\n"  # two requests with one operation id: one effect
    assert rec["outcome"]["termination_reason"] in ("natural", "external_verification_required")
    uses, answers = _answered_once(server)
    assert uses == answers == ["tu_x"]


def _try(fn):  # type: ignore[no-untyped-def]
    try:
        return fn()
    except Exception:
        return None
