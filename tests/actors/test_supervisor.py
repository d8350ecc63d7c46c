"""Supervisor matrix in the style of OTP's supervisor_SUITE, plus escalation, backoff and shutdown grace."""

from __future__ import annotations

import os
import signal
import time
from dataclasses import replace
from pathlib import Path

import pytest

from actors.tree.spec import Restart, Strategy
from geode.protocol import lifecycle
from tests.actors.supervision_kit import FAST, supervised, tiny, wait_for

EXITS = {"normal": signal.SIGUSR1, "error": signal.SIGUSR2, "sigkill": signal.SIGKILL}


@pytest.mark.parametrize("strategy", ["one_for_one", "rest_for_one"])
@pytest.mark.parametrize("restart", ["permanent", "transient", "temporary"])
def test_matrix(tmp_path: Path, restart: Restart, strategy: Strategy) -> None:
    """For each exit kind the first child restarts (or not) per its type; siblings per the strategy."""
    specs = [tiny(f"a-{k}", restart=restart) for k in EXITS] + [tiny("b")]
    with supervised(tmp_path, specs, replace(FAST, strategy=strategy)) as run:
        for spec in specs:
            run.wait_state(spec.name, "running")
        for kind, sig in EXITS.items():
            name = f"a-{kind}"
            wait_for(lambda: all(c.state in ("running", "stopped") for c in run.sup.snapshot()), 10)
            before = run.child(name)
            b_before = run.child("b")
            os.kill(before.pid, sig)
            restarted = restart == "permanent" or (restart == "transient" and kind != "normal")
            if restarted:
                after = run.wait_state(name, "running", before.incarnation + 1)
                assert after.pid != before.pid and after.restarts == before.restarts + 1
            else:
                run.wait_state(name, "stopped")
            if strategy == "rest_for_one" and restarted:
                run.wait_state("b", "running", b_before.incarnation + 1)
            else:
                assert run.child("b").incarnation == b_before.incarnation
        reasons = [r for n, _, r in run.died if n.startswith("a-")]
        assert "exit 0" in reasons and "exit 1" in reasons and "killed by SIGKILL" in reasons


def test_rest_for_one_leaves_earlier_children_alone(tmp_path: Path) -> None:
    specs = [tiny("first"), tiny("mid"), tiny("last")]
    with supervised(tmp_path, specs, replace(FAST, strategy="rest_for_one")) as run:
        for s in specs:
            run.wait_state(s.name, "running")
        first, mid, last = (run.child(s.name) for s in specs)
        os.kill(mid.pid, signal.SIGKILL)
        run.wait_state("mid", "running", mid.incarnation + 1)
        run.wait_state("last", "running", last.incarnation + 1)
        assert run.child("first").incarnation == first.incarnation
        started = [b["name"] for _, t, b in run.events if t == lifecycle.CHILD_STARTED][3:]
        assert started == ["mid", "last"]  # restarted in start order, last only after mid


def test_escalation_stops_tree_nonzero(tmp_path: Path) -> None:
    specs = [tiny("ok"), tiny("crasher", mode="crash")]
    with supervised(tmp_path, specs, replace(FAST, intensity=3, period_s=30)) as run:
        wait_for(lambda: run.result, 10, what="supervisor exit")
        assert run.result == [1]
        assert run.child("crasher").state == "fatal"
        assert run.child("ok").state == "stopped" and run.child("ok").pid is None
        assert sum(1 for n, _, _ in run.died if n == "crasher") == 4


def test_backoff_grows_between_restarts(tmp_path: Path) -> None:
    cfg = replace(FAST, backoff_base_s=0.15, backoff_max_s=2, intensity=10)
    with supervised(tmp_path, [tiny("crasher", mode="crash")], cfg) as run:
        wait_for(lambda: sum(1 for _, t, _ in run.events if t == lifecycle.CHILD_STARTED) >= 5, 15)
        exits = [ts for ts, t, _ in run.events if t == lifecycle.CHILD_EXITED]
        starts = [ts for ts, t, _ in run.events if t == lifecycle.CHILD_STARTED]
        delays = [s - e for e, s in zip(exits, starts[1:], strict=False)]
        assert delays[0] < 0.1  # first restart immediate
        assert delays[1] >= 0.14 and delays[2] >= 0.29 and delays[3] >= 0.59, delays


def test_hanging_child_killed_after_grace(tmp_path: Path) -> None:
    with supervised(tmp_path, [tiny("hang", mode="hang", shutdown_ms=400)]) as run:
        c = run.wait_state("hang", "running")
        t0 = time.monotonic()
        run.sup.request_restart("hang")
        run.wait_state("hang", "running", c.incarnation + 1)
        assert 0.35 < time.monotonic() - t0 < 3
        assert run.died[-1] == ("hang", c.incarnation, "killed by SIGKILL")


def test_child_not_ready_in_time_is_killed_and_restarted(tmp_path: Path) -> None:
    cfg = replace(FAST, ready_timeout_s=0.3)
    with supervised(tmp_path, [tiny("slow", mode="never_ready")], cfg) as run:
        wait_for(lambda: run.child("slow").incarnation >= 2, 10)
        assert run.child("slow").state in ("starting", "backoff")
        assert run.died[0][2] == "killed by SIGKILL"


def test_restart_command_and_unknown_child(tmp_path: Path) -> None:
    from geode.protocol.errors import NotFound

    with supervised(tmp_path, [tiny("x")]) as run:
        c = run.wait_state("x", "running")
        run.sup.request_restart("x")
        assert run.wait_state("x", "running", c.incarnation + 1).restarts == 1
        with pytest.raises(NotFound):
            run.sup.request_restart("nope")


def test_stop_leaves_no_children(tmp_path: Path) -> None:
    with supervised(tmp_path, [tiny("a"), tiny("b")]) as run:
        pids = [run.wait_state(n, "running").pid for n in ("a", "b")]
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    assert all(c.state == "stopped" for c in run.sup.snapshot())
