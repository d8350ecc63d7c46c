"""Chaos latency on a real tree: a child killed with a request of another child in flight to it costs that
request the restart, not its call timeout. The supervisor's ``child_exited`` fails the call at once and the
caller's own retry (idempotent) goes to the next incarnation; DESIGN.md §5 is unchanged (the effect once,
its receipt committed)."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from actors.bus import Bus
from geode.faults import marker
from geode.records.store_client import StoreClient
from tests.actors.tree_kit import children, geode_popen, scripted_tree, wait_children, wait_for
from tests.faults.matrix_kit import effect_reply, one_worker_tree

STORE_CALL_TIMEOUT_S = 5.0  # StoreClient's per-call timeout: what a call in flight waited before
LANES_CALL_TIMEOUT_S = 5.0  # the loop worker's turn.done call timeout


def test_a_store_call_in_flight_when_the_store_dies_is_retried_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    effects = tmp_path / "effects.log"
    # the store commits the executor's admission, then never replies (hangs): the admit call is in flight
    monkeypatch.setenv("GEODE_FAULTS", "store@store.after_admit:hang")
    with one_worker_tree(tmp_path, effect_reply(effects), ws) as home:
        monkeypatch.setenv("GEODE_HOME", str(home.root))
        proc = geode_popen(home, "ask", "effect one", "--json", cwd=ws)
        try:
            wait_for(lambda: marker("store.after_admit").exists(), 60, what="the store to hang")
            store = children(home)["store"]
            os.kill(store.pid or 0, signal.SIGKILL)
            t_kill = time.monotonic()
            out, err = proc.communicate(timeout=60)
            took = time.monotonic() - t_kill
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
        back = store.incarnation
        wait_children(home, lambda k: k["store"].state == "running" and k["store"].incarnation > back)
        print(f"\nkill → answer {took:.2f}s")
        assert proc.returncode == 0, out + err
        answer = json.loads(out)
        assert answer["termination_reason"] == "natural", answer
        assert [c.get("error") for c in answer["tool_calls"]] == [None], answer
        assert effects.read_text().split().count("one") == 1  # the effect ran once
        # before: the executor's admit waited out its 5 s timeout before its retry reached the new store
        assert took < STORE_CALL_TIMEOUT_S - 1.0, f"kill → answer {took:.2f}s"
        log = (home.logs_dir / "executor.log").read_text()
        assert f"store#{store.incarnation} exited" in log and "failed at once" in log, log[-2000:]


def test_a_turn_done_in_flight_when_lanes_dies_is_retried_at_once(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    frozen: list[int] = []

    def reply(req: Any) -> Any:  # the turn runs: freeze lanes, so its turn.done will get no answer
        if frozen:
            os.kill(frozen[0], signal.SIGSTOP)
        return {"text": "all done"}

    with scripted_tree(tmp_path, reply, ws, cwd=ws) as (home, _):
        lanes = children(home)["lanes"]
        frozen.append(lanes.pid or 0)
        bus = Bus("peer-exit-test", 1, home).start()
        try:
            store = StoreClient(bus.transport)
            proc = geode_popen(home, "ask", "hello", "--json", cwd=ws)
            try:
                sid = wait_for(lambda: [s.session_id for s in store.list_sessions()], 60)[0]
                # the loop's last store write before it reports turn.done, then kill the frozen lanes
                wait_for(lambda: any(r.event.kind == "turn.ended" for r in store.read_timeline(sid)), 60)
                os.kill(lanes.pid or 0, signal.SIGKILL)
                t_kill = time.monotonic()
                out, err = proc.communicate(timeout=60)
                took = time.monotonic() - t_kill
            finally:
                if proc.poll() is None:
                    proc.kill()
                    proc.communicate()
        finally:
            bus.stop()
        print(f"\nkill → answer {took:.2f}s")
        assert proc.returncode == 0, out + err
        assert json.loads(out)["termination_reason"] == "natural", out
        # before: turn.done waited out its 5 s call timeout before its retry reached the new lanes
        assert took < LANES_CALL_TIMEOUT_S - 1.0, f"kill → answer {took:.2f}s"
        log = "".join(p.read_text() for p in home.logs_dir.glob("loop-*.log"))
        assert f"lanes#{lanes.incarnation} exited" in log and "failed at once" in log, log[-2000:]
