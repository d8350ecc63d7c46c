"""Chaos latency on a real tree: a restarted loop worker builds its provider's SDK client beside its start-up,
so the first turn it runs is as quick as the next one (importing the SDK took about a second, paid by the
first turn of every incarnation: under chaos, most re-queued turns land on a freshly restarted worker)."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from actors.cli.client import ControlClient
from geode.home import GeodeHome
from geode.protocol import control as c
from tests.actors.tree_kit import children, scripted_tree, wait_children, wait_for
from tests.faults.matrix_kit import one_worker_tree


def _turn(home: GeodeHome, ws: Path, text: str) -> float:
    """One turn through the control client library (as `geode ask` runs it); its latency."""
    cl = ControlClient(home, client_version="warm-test")
    try:
        cl.connect(timeout_s=10.0, cwd=str(ws), is_tty=False, mode="IPC")
        t0 = time.monotonic()
        backlog: list[dict[str, object]] = []
        turn_id = cl.request(c.PROMPT, {"text": text, "session_id": cl.session_id}, on_event=backlog.append)
        result = cl.follow(turn_id["turn_id"], backlog=backlog, timeout_s=60)
        took = time.monotonic() - t0
        assert result.get("termination_reason") == "natural", result
        return took
    finally:
        cl.close()


def test_the_first_turn_of_a_restarted_loop_worker_is_as_quick_as_the_next(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    with one_worker_tree(tmp_path, lambda req: {"text": "hello"}, ws) as home:
        _turn(home, ws, "warm the tree")
        loop = children(home)["loop-1"]
        os.kill(loop.pid or 0, signal.SIGKILL)
        new = loop.incarnation + 1
        wait_children(home, lambda k: k["loop-1"].state == "running" and k["loop-1"].incarnation == new)
        log = home.logs_dir / "loop-1.log"
        warmed = f"loop-1#{new}: provider warmed"  # it built its provider without waiting for a turn
        wait_for(lambda: warmed in log.read_text(), 30, what="the warm-up")
        first = _turn(home, ws, "first turn of the new worker")
        second = _turn(home, ws, "second turn")
        print(f"\nfirst turn after the restart {first:.2f}s, the next {second:.2f}s")
        # before: the first paid the SDK import (~0.9 s on a quiet 2-core box, more under load)
        assert first < second + 0.4, f"first {first:.2f}s, next {second:.2f}s"


def test_lanes_sends_no_turn_to_a_restarted_worker_before_it_is_warm(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    with scripted_tree(tmp_path, lambda req: {"text": "hello"}, ws, cwd=ws) as (home, _):
        for i in range(2):
            _turn(home, ws, f"warm the tree {i}")
        loop = children(home)["loop-1"]
        os.kill(loop.pid or 0, signal.SIGKILL)
        new = loop.incarnation + 1
        wait_children(home, lambda k: k["loop-1"].state == "running" and k["loop-1"].incarnation == new)
        took = [_turn(home, ws, f"turn {i} while loop-1 warms up") for i in range(4)]
        print(f"\nturns right after loop-1 restarted: {', '.join(f'{t:.2f}s' for t in took)}")
        # before: lanes alternated between the workers, and the turn on the cold one paid the SDK import
        assert max(took) - min(took) < 0.5, took
        log = home.logs_dir / "loop-1.log"
        wait_for(lambda: f"loop-1#{new}: provider warmed" in log.read_text(), 30, what="the warm-up")
        wait_for(lambda: f"loop-1#{new} ready with capacity" in log.read_text(), 30, what="the announcement")
