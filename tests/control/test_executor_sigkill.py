"""A real `geode serve` tree, scripted provider: the executor is SIGKILLed while a run_bash effect runs.

Within seconds the turn gets `effect_outcome_uncertain` for that call (no wait for the call's own timeout),
the receipt is listed as uncertain, the handler is not re-run by the next executor incarnation, and after
`geode reconcile` the resumed session runs a new effect."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from geode.home import GeodeHome
from tests.actors.tree_kit import geode, geode_popen, scripted_tree, status_children, wait_for
from tests.processes import kill_bash_calls_in

SLOW = "echo $$ > pgid; echo run >> runs.log; sleep 30; echo done >> runs.log"


def _last_user(req: Any) -> tuple[str, list[dict[str, Any]]]:
    """The text that started this turn and the tool results that followed it."""
    msgs = req.body.get("messages", []) if isinstance(req.body, dict) else []
    results: list[dict[str, Any]] = []
    for msg in reversed(msgs):
        content = msg.get("content")
        if isinstance(content, str):
            return content, results
        blocks = content or []
        if any(b.get("type") == "tool_result" for b in blocks):
            results = [b for b in blocks if b.get("type") == "tool_result"] + results
        elif msg.get("role") == "user":
            return " ".join(b.get("text", "") for b in blocks), results
    return "", results


SEEN: list[str] = []  # the tool results the model was shown (the scripted server runs in this process)


def _reply(ws: Path):  # type: ignore[no-untyped-def]
    def reply(req: Any) -> Any:
        text, results = _last_user(req)
        if results:
            SEEN.append(json.dumps(results[-1].get("content")))
            return {"text": "noted what the tool said"}
        if "slow" in text:
            return {"tool_calls": [{"name": "run_bash", "input": {"command": SLOW, "timeout": 60}}]}
        return {
            "tool_calls": [
                {"name": "write_file", "input": {"file_path": str(ws / "after.txt"), "content": "ok"}}
            ]
        }

    return reply


@pytest.fixture
def tree(tmp_path: Path) -> Iterator[tuple[GeodeHome, Path]]:
    ws = tmp_path / "ws"
    ws.mkdir()
    with scripted_tree(tmp_path, _reply(ws), ws, cwd=ws) as (home, _server):
        try:
            yield home, ws
        finally:
            kill_bash_calls_in(ws)  # the orphaned call of the killed executor: its outcome was never known


def _geode(home: GeodeHome, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return geode(home, *args, cwd=cwd, timeout=90)


def _json(home: GeodeHome, ws: Path, *args: str) -> Any:
    r = _geode(home, ws, *args, "--json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def _wait(pred, timeout_s: float = 20.0):  # type: ignore[no-untyped-def]
    return wait_for(pred, timeout_s, interval_s=0.1)


def test_sigkilled_executor_mid_effect_is_uncertain_at_once_and_reconciled(
    tree: tuple[GeodeHome, Path],
) -> None:
    home, ws = tree
    ask = geode_popen(home, "ask", "please run slow", "--json", "--dangerously-skip-permissions", cwd=ws)
    try:
        receipt = _wait(
            lambda: next(
                (
                    r
                    for r in _json(home, ws, "receipts")
                    if r["identity"]["tool_name"] == "run_bash" and r["state"] == "admitted"
                ),
                None,
            )
        )
        _wait(lambda: (ws / "runs.log").exists())  # the handler is running
        before = status_children(home)["executor"]
        assert receipt["owner"] == f"executor#{before['incarnation']}"
        os.kill(int(before["pid"]), signal.SIGKILL)
        t0 = time.monotonic()
        out, err = ask.communicate(timeout=30)
        took = time.monotonic() - t0
    finally:
        if ask.poll() is None:
            ask.kill()
    print(f"\nSIGKILL → turn finished in {took:.2f}s")
    assert took < 10.0, f"the turn waited {took:.1f}s for a dead executor"
    result = json.loads(out)
    assert [t["error"] for t in result["tool_calls"]] == ["effect_outcome_uncertain"], result
    seen = SEEN[-1]  # the model saw the uncertain outcome, not a retry or a silent failure
    assert "effect_outcome_uncertain" in seen and "geode reconcile" in seen and "op-" in seen, seen
    # the answer waits for reconciliation: Verify escalates (candidate withheld), the turn ends with a result
    assert result["termination_reason"] == "external_verification_required", (result, err)
    assert result["error"] == "non-retryable miss: unresolved_receipts"
    sid, op = result["session_id"], receipt["operation_id"]

    uncertain = _json(home, ws, "receipts", "--uncertain")
    assert [(r["operation_id"], r["state"]) for r in uncertain] == [(op, "uncertain")]
    _wait(
        lambda: (
            (k := status_children(home))
            and k["executor"]["incarnation"] == before["incarnation"] + 1
            and k["executor"]["state"] == "running"
        )
    )

    r = _geode(home, ws, "reconcile", op, "--outcome", "applied", "--note", "the bash group was seen")
    assert r.returncode == 0, r.stderr
    assert _json(home, ws, "receipts", "--uncertain") == []

    again = _geode(
        home, ws, "ask", "--resume", sid, "now write after.txt", "--json", "--dangerously-skip-permissions"
    )
    assert again.returncode == 0, again.stdout + again.stderr
    follow = json.loads(again.stdout)
    assert follow["session_id"] == sid and follow["termination_reason"] == "natural", follow
    assert [t["error"] for t in follow["tool_calls"]] == [None]
    assert (ws / "after.txt").read_text() == "ok"
    assert (ws / "runs.log").read_text() == "run\n"  # the killed call's handler never ran again
    states = {r["operation_id"]: r["state"] for r in _json(home, ws, "receipts", "--session", sid)}
    assert states[op] == "reconciled" and sorted(states.values()) == ["committed", "reconciled"]
