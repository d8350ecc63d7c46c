"""Supervisor matrix in the style of OTP's supervisor_SUITE, plus escalation, backoff and shutdown grace."""

from __future__ import annotations

import os
import re
import signal
import time
from dataclasses import replace
from pathlib import Path

import pytest

from actors.tree.child_handle import shown_state
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


def test_a_ready_child_that_dies_restarts_at_once_every_time(tmp_path: Path) -> None:
    """Kill → next incarnation spawned at once, ready well under 1 s, also when killed again right after its
    restart (before: the 2nd and 3rd kill within ``stable_s`` waited a growing backoff, here 1 s and 2 s)."""
    cfg = replace(FAST, backoff_base_s=1.0, backoff_max_s=4.0)
    with supervised(tmp_path, [tiny("svc")], cfg) as run:
        for inc in range(1, 4):
            c = run.wait_state("svc", "running", inc)
            t0 = time.monotonic()
            os.kill(c.pid, signal.SIGKILL)
            run.wait_state("svc", "running", c.incarnation + 1)
            spawned = next(
                ts for ts, t, b in run.events if t == lifecycle.CHILD_STARTED and b["incarnation"] > inc
            )
            assert spawned - t0 < 0.3  # the policy: no backoff (the rest is the tiny child's own start)
            assert time.monotonic() - t0 < 1.0  # about 0.1 s on a quiet machine
        assert run.child("svc").restarts == 3


def test_a_child_dying_before_ready_backs_off_and_status_says_when(tmp_path: Path) -> None:
    cfg = replace(FAST, backoff_base_s=0.3, backoff_max_s=30.0, start_retries=0)
    with supervised(tmp_path, [tiny("ok"), tiny("bad", mode="fail_start")], cfg) as run:
        wait_for(lambda: run.child("bad").incarnation >= 4, 10, what="four failed starts")
        exits = [ts for ts, t, b in run.events if t == lifecycle.CHILD_EXITED and b["name"] == "bad"]
        starts = [ts for ts, t, b in run.events if t == lifecycle.CHILD_STARTED and b["name"] == "bad"]
        gaps = [s - e for e, s in zip(exits, starts[1:], strict=False)]  # exit → next start
        assert gaps[0] < 0.25 and gaps[1] >= 0.29 and gaps[2] >= 0.59, gaps  # at once, then 0.3 doubling
        info = run.wait_state("bad", "backoff", 4)
        assert info.next_try_s is not None and 0.0 < info.next_try_s <= 1.2
        assert re.fullmatch(r"backoff \(next try in \d+\.\d s\)", shown_state(info))
        assert run.child("ok").state == "running" and run.result == []


def test_a_child_failing_every_start_goes_fatal_after_start_retries(tmp_path: Path) -> None:
    cfg = replace(FAST, start_retries=3)
    with supervised(tmp_path, [tiny("ok"), tiny("bad", mode="fail_start")], cfg) as run:
        info = run.wait_state("bad", "fatal")
        assert info.incarnation == 4 and "4 failed starts in a row (exit 1)" in info.reason
        assert run.child("ok").state == "running" and run.result == []


def test_one_flapping_child_goes_fatal_the_others_keep_serving(tmp_path: Path) -> None:
    """More than ``intensity`` restarts of one child within ``period_s``: that child is fatal, the tree
    keeps running (before: the whole tree stopped with exit 1); ``geode restart`` brings it back."""
    cfg = replace(FAST, intensity=3, period_s=30)
    with supervised(tmp_path, [tiny("a"), tiny("flappy"), tiny("b")], cfg) as run:
        a, b = run.wait_state("a", "running"), run.wait_state("b", "running")
        inc = run.wait_state("flappy", "running").incarnation
        for _ in range(4):
            c = run.wait_state("flappy", "running", inc)
            os.kill(c.pid, signal.SIGKILL)
            inc += 1
        info = run.wait_state("flappy", "fatal")
        assert info.pid is None and info.reason == "4 restarts within 30 s"
        assert "fatal (4 restarts within 30 s; geode restart flappy)" == shown_state(info)
        assert run.result == [] and run.sup.state == "running"
        assert (run.child("a").pid, run.child("b").pid) == (a.pid, b.pid)
        run.sup.request_restart("flappy")
        back = run.wait_state("flappy", "running", info.incarnation + 1)
        assert back.reason == "" and run.result == []
        os.kill(back.pid, signal.SIGKILL)  # the operator's restart cleared the count too
        run.wait_state("flappy", "running", back.incarnation + 1)


def test_a_tree_wide_storm_still_escalates(tmp_path: Path) -> None:
    specs = [tiny("ok"), *(tiny(f"crasher{i}", mode="crash") for i in range(3))]
    with supervised(tmp_path, specs, replace(FAST, intensity=100, tree_intensity=6, period_s=30)) as run:
        wait_for(lambda: run.result, 10, what="supervisor exit")
        assert run.result == [1]
        assert [c.reason for c in run.sup.snapshot() if c.state == "fatal"] == ["restart storm"]
        assert run.child("ok").state == "stopped" and run.child("ok").pid is None
        assert sum(1 for n, _, _ in run.died if n.startswith("crasher")) == 7


def test_the_loop_pool_never_waits_in_backoff_as_a_whole(tmp_path: Path) -> None:
    """Both pool members fail every start with a 30 s backoff: whenever neither is up, the one due first
    starts at once, so the pool keeps trying; a lone child with the same failures waits its 30 s."""
    cfg = replace(FAST, backoff_base_s=30.0, backoff_max_s=30.0, start_retries=0)
    specs = [tiny("loop-1", mode="fail_start"), tiny("loop-2", mode="fail_start"), tiny("solo", "fail_start")]
    with supervised(tmp_path, specs, cfg) as run:

        def starts(prefix: str) -> int:
            return sum(
                1 for _, t, b in run.events if t == lifecycle.CHILD_STARTED and b["name"].startswith(prefix)
            )

        wait_for(lambda: starts("loop-") >= 8, 10, what="the pool keeps starting")
        assert starts("solo") == 2  # first start, one immediate retry, then 30 s backoff
        pool = [c for c in run.sup.snapshot() if c.name.startswith("loop-")]
        assert min(c.next_try_s if c.next_try_s is not None else 0.0 for c in pool) < 1.0
        assert run.child("solo").state == "backoff" and (run.child("solo").next_try_s or 0) > 25


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
