"""Real tree: SIGKILL the executor inside a turn's tool call. A call that was never admitted does not pause
the session (the model is told it did not run); one that was admitted pauses it, and then the receipt is
listed by `geode receipts --uncertain` and `geode reconcile` resolves it (issue 12)."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

from geode.records.store_client import StoreClient
from geode.testing.scenario import RecordedRequest
from tests.actors.tree_kit import geode, wait_children
from tests.loop.tree_rig import _done, _submit, _wait


def _reply(command: str):  # type: ignore[no-untyped-def]
    def reply(req: RecordedRequest) -> Any:
        last = req.body["messages"][-1]
        if isinstance(last.get("content"), list) and any(
            b.get("type") == "tool_result" for b in last["content"]
        ):
            return {"text": "finished"}
        return {"tool_calls": [{"name": "run_bash", "id": "tu_x", "input": {"command": command}}]}

    return reply


def _kill_executor(home) -> None:  # type: ignore[no-untyped-def]
    before = wait_children(home, lambda k: k["executor"].state == "running")["executor"]
    os.kill(before.pid, signal.SIGKILL)
    wait_children(home, lambda k: k["executor"].incarnation > before.incarnation)


def test_executor_killed_before_admission_sends_the_call_again_and_it_runs_once(launch, ws: Path) -> None:  # type: ignore[no-untyped-def]
    """The call waits in its PreToolUse hook (nothing admitted) when the executor dies: the loop sends it
    again under the same operation id to the next incarnation, where it runs once; the session is usable."""
    entered, release, log = ws / "entered", ws / "release", ws / "log.txt"
    hook = f"sh -c 'echo e >> {entered}; while [ ! -f {release} ]; do sleep 0.05; done; echo {{}}'"
    home, _server, bus = launch(
        _reply(f"echo X >> {log}"),
        f'[[hooks.PreToolUse]]\nmatcher = "run_bash"\ncommand = "{hook}"\ntimeout = 60',
    )
    try:
        _submit(bus, "t-none", "s-none", ws)
        _wait(lambda: entered.exists())  # the call waits in its PreToolUse hook: nothing admitted yet
        _kill_executor(home)
        _wait(lambda: entered.read_text().count("e") >= 2)  # sent again: the next incarnation runs the hook
    finally:
        release.write_text("go")
    rec = _done(bus, "t-none")
    assert rec["outcome"]["termination_reason"] == "natural", rec["outcome"]
    assert log.read_text() == "X\n"  # the effect ran once, in the next incarnation
    receipts = StoreClient(bus.transport).list_receipts(session_id="s-none")
    assert [r.state.value for r in receipts] == ["committed"]
    r = geode(home, "sessions", "--json")
    assert r.returncode == 0, r.stderr
    assert "paused" not in [s.get("status") for s in _sessions(r.stdout) if s.get("session_id") == "s-none"]


def test_executor_killed_after_admission_pauses_and_can_be_reconciled(launch, ws: Path) -> None:  # type: ignore[no-untyped-def]
    runs = ws / "runs.log"
    home, _server, bus = launch(_reply(f"echo run >> {runs}; sleep 30"))
    _submit(bus, "t-open", "s-open", ws)
    _wait(lambda: runs.exists())  # admitted, the handler runs
    _kill_executor(home)
    rec = _done(bus, "t-open")
    assert rec["outcome"]["termination_reason"] == "external_verification_required", rec["outcome"]
    r = geode(home, "receipts", "--uncertain", "--json")
    assert r.returncode == 0, r.stderr
    assert "s-open" in r.stdout
    op = StoreClient(bus.transport).list_receipts(session_id="s-open", uncertain_only=True)[0].operation_id
    r = geode(home, "reconcile", op, "--outcome", "applied")
    assert r.returncode == 0, r.stdout + r.stderr
    assert runs.read_text() == "run\n"


def _sessions(text: str) -> list[dict[str, Any]]:
    import json

    data = json.loads(text)
    return data if isinstance(data, list) else data.get("sessions", [])
