"""A loop worker killed after a tool round's results came back and before the save that holds them, on a real
`geode serve` tree (issue 34: one checkpoint save per tool round, the results ride the next save).

``GEODE_FAULTS`` hangs loop-1 where round 2's batch is about to be written ahead: the model has answered round
1's results (a ``run_bash`` effect and a ``glob_files`` read), nothing of it is saved, the store holds round
1's pending batch. The test checks that, SIGKILLs the worker there, and the next incarnation must repair round
1 from its receipts as it does a round cut during its tools: the effect not run again and the model shown the
result it saw before (the first run's own output, from the committed receipt), the read run again (it has no
receipt and no effect), round 2 run once, the turn answered, and the session's next turn answered."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any

import pytest

from geode.records.store_client import StoreClient
from geode.testing.scenario import RecordedRequest
from tests.actors.tree_kit import wait_children
from tests.loop.tree_rig import _answered_once, _done, _submit, _wait, launch, ws  # noqa: F401

POINT = "loop.before_pending_checkpoint"


def _results(req: RecordedRequest) -> dict[str, dict[str, Any]]:
    """The tool_results of a model request, by tool_use id."""
    blocks = [b for m in req.body["messages"] if isinstance(m["content"], list) for b in m["content"]]
    return {b["tool_use_id"]: b for b in blocks if b.get("type") == "tool_result"}


def _model(root: Path):  # type: ignore[no-untyped-def]
    """Turn 1: round 1 = an effect with its own pid in its output + a read; round 2 = an effect; then text.
    Turn 2 (a second user message): a text answer."""
    effects = root / "effects.log"

    def reply(req: RecordedRequest) -> Any:
        msgs = req.body["messages"]
        if sum(1 for m in msgs if m["role"] == "user" and not _has_results(m["content"])) > 1:
            return {"text": "second turn answered"}
        done = sum(1 for m in msgs if _has_results(m["content"]))
        if done == 0:
            one = f"echo one >> {effects}; echo ran-one-$$"
            return {
                "tool_calls": [
                    {"name": "run_bash", "id": "tu_one", "input": {"command": one}},
                    {"name": "glob_files", "id": "tu_glob", "input": {"pattern": "*.txt"}},
                ]
            }
        if done == 1:
            two = f"echo two >> {effects}"
            return {"tool_calls": [{"name": "run_bash", "id": "tu_two", "input": {"command": two}}]}
        return {"text": "finished"}

    return reply


def _has_results(content: str | list[dict[str, Any]]) -> bool:
    return isinstance(content, list) and any(b.get("type") == "tool_result" for b in content)


def test_a_worker_killed_with_a_rounds_results_unsaved_resumes_without_running_them_again(
    launch,  # type: ignore[no-untyped-def]  # noqa: F811
    ws: Path,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    (ws / "notes.txt").write_text("a file for the read\n")
    monkeypatch.setenv("GEODE_FAULTS", f"loop-*@{POINT}:hang:2")  # round 2's write-ahead (round 1's: 1st)
    home, server, bus = launch(_model(ws))
    first = wait_children(home, lambda k: k.get("loop-1") and k["loop-1"].state == "running")["loop-1"]
    _submit(bus, "t-unsaved", "s-unsaved", ws)
    _wait(lambda: (home.root / "faults" / f"{POINT}.fired").exists(), timeout=30)
    # the model answered round 1's results; the store still holds round 1 written ahead, no result
    stored = StoreClient(bus.transport).load_checkpoint("s-unsaved")
    assert stored is not None and stored.state.pending_batch is not None
    assert [o.tool_use_id for o in stored.state.pending_batch.operations] == ["tu_one", "tu_glob"]
    assert [m["role"] for m in stored.messages] == ["user", "assistant"]
    assert len(server.requests) == 2
    seen = _results(server.requests[1])
    assert "ran-one-" in json.dumps(seen["tu_one"]) and not seen["tu_glob"].get("is_error")
    assert first.pid is not None
    os.kill(first.pid, signal.SIGKILL)
    rec = _done(bus, "t-unsaved")
    assert rec["incarnation"] > first.incarnation
    assert rec["outcome"]["termination_reason"] == "natural" and rec["outcome"]["text"] == "finished"
    assert (ws / "effects.log").read_text().split() == ["one", "two"]  # each effect ran once
    resumed = _results(server.requests[2])  # the new incarnation's first request: round 1 repaired
    assert resumed["tu_one"]["content"] == seen["tu_one"]["content"]  # the first run's output (its pid)
    assert resumed["tu_glob"] == seen["tu_glob"]  # the read ran again: the same files
    uses, answers = _answered_once(server)
    assert uses == answers == ["tu_glob", "tu_one", "tu_two"]
    _submit(bus, "t-next", "s-unsaved", ws)  # the session goes on
    nxt = _done(bus, "t-next")
    assert nxt["outcome"]["termination_reason"] == "natural"
    assert nxt["outcome"]["text"] == "second turn answered"
