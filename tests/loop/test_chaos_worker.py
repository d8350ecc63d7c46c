"""Chaos: SIGKILL the loop worker at random points of a multi-round turn; every effect runs exactly once."""

from __future__ import annotations

import os
import random
import signal
import threading
from pathlib import Path
from typing import Any

from geode.testing.scenario import RecordedRequest
from tests.actors.tree_kit import wait_children
from tests.loop.tree_rig import _answered_once, _done, _submit, _wait

ROUNDS = 6


def _rounds_reply(log: Path):  # type: ignore[no-untyped-def]
    def reply(req: RecordedRequest) -> Any:
        blocks = [b for m in req.body["messages"] if isinstance(m["content"], list) for b in m["content"]]
        done = sum(1 for b in blocks if b.get("type") == "tool_result")
        if done >= ROUNDS:
            return {"text": f"all {ROUNDS} rounds done"}
        return {
            "tool_calls": [{"name": "run_bash", "input": {"command": f"echo R{done} >> {log}; sleep 0.3"}}]
        }

    return reply


def test_random_worker_kills_never_double_an_effect(launch, ws: Path) -> None:  # type: ignore[no-untyped-def]
    log = ws / "rounds.log"
    home, server, bus = launch(_rounds_reply(log))
    rng = random.Random(5)
    pause = threading.Event()
    _submit(bus, "t-chaos", "s-chaos", ws)
    kills = 0
    for _ in range(3):
        kid = wait_children(home, lambda k: k["loop-1"].state == "running", timeout_s=30)["loop-1"]
        _wait(lambda: log.exists(), timeout=30)
        pause.wait(rng.uniform(0.1, 0.7))
        lines = log.read_text().split()
        if len(lines) >= ROUNDS:
            break
        os.kill(kid.pid, signal.SIGKILL)
        kills += 1
        wait_children(home, lambda k, inc=kid.incarnation: k["loop-1"].incarnation > inc, timeout_s=30)
    rec = _done(bus, "t-chaos")
    assert kills >= 1
    lines = log.read_text().split()
    assert sorted(lines) == sorted(f"R{i}" for i in range(ROUNDS)), lines  # each effect exactly once
    assert rec["outcome"]["termination_reason"] in ("natural", "external_verification_required")
    uses, answers = _answered_once(server)
    assert uses == answers and len(uses) == ROUNDS
