"""Real processes: SIGKILL the loop worker mid-batch; the turn resumes on a new incarnation once, and a call
the live executor was still running is awaited (its real result), never re-run."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

from geode.records.store_client import StoreClient
from geode.testing.scenario import RecordedRequest
from tests.actors.tree_kit import wait_children
from tests.loop.tree_rig import _answered_once, _done, _submit, _wait


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
                    "input": {
                        "command": f"echo B >> {ws / 'log.txt'}; sleep 2; echo b-finished",
                        "timeout": 60,
                    },
                },
                {
                    "name": "write_file",
                    "id": "tu_c",
                    "input": {"file_path": str(ws / "c.txt"), "content": "C"},
                },
            ]
        }

    return reply


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
    # b's receipt was still admitted (its handler kept running in the live executor): the resumed turn
    # waits for it to settle and answers with b's real result instead of escalating over a known outcome
    assert out["termination_reason"] == "natural", out
    assert out["text"] == "done"
    results = [
        b
        for m in server.requests[-1].body["messages"]
        if isinstance(m.get("content"), list)
        for b in m["content"]
        if b.get("type") == "tool_result"
    ]
    assert "b-finished" in str([r for r in results if r.get("tool_use_id") == "tu_b"])
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
