"""Cancelling a run_bash stops the script where it is: the shell never sees its child die first and runs the
next line. ``sleep 5; echo done > f`` cancelled during the sleep never writes f, even when the executor's
thread is descheduled between two kill calls and the process table lists the child before the shell (the
order that let a clean-clone CI run write f after a SIGINT to ``geode ask``)."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

from geode.tools.builtin import bash_containment
from geode.tools.builtin.bash import BashLimits
from geode.tools.builtin.bash_containment import CallBox, ProcInfo, ancestors_first
from tests.waiting import poll_for


class _Yes:
    def request(self, ctx, tool_name, detail, safety):  # type: ignore[no-untyped-def]
        return "y"


@pytest.fixture
def rig(make_rig):  # type: ignore[no-untyped-def]
    return make_rig(approvals=_Yes(), services={"bash_limits": BashLimits(grace_s=2.0)})


def _children_first(monkeypatch: pytest.MonkeyPatch) -> None:
    """The worst order: every process after its descendants, with a pause after each single kill."""
    members = CallBox.members

    def deepest_first(self: CallBox) -> list[ProcInfo]:
        return ancestors_first(members(self))[::-1]

    kill = bash_containment._kill

    def slow_kill(pid: int, sig: int) -> None:
        kill(pid, sig)
        time.sleep(0.2)  # the executor thread loses the CPU between two kill calls (a loaded machine)

    monkeypatch.setattr(CallBox, "members", deepest_first)
    monkeypatch.setattr(bash_containment, "_kill", slow_kill)


def _cancel_during_sleep(rig: Any, ws: Path, command: str) -> Any:
    out: dict[str, Any] = {}
    t = threading.Thread(target=lambda: out.setdefault("res", rig.call("run_bash", {"command": command})))
    t.start()
    poll_for(lambda: (ws / "pgid").exists() and (ws / "pgid").read_text().strip(), 10, what="the shell ran")
    assert rig.executor.cancel("s1", "t1") == 1
    t.join(15)
    assert not t.is_alive()
    return out["res"]


def test_a_cancelled_script_never_runs_its_next_line(rig, monkeypatch: pytest.MonkeyPatch) -> None:
    _children_first(monkeypatch)
    ws = rig.workspace
    res = _cancel_during_sleep(rig, ws, f"echo $$ > {ws}/pgid; sleep 5; echo done > {ws}/f")
    assert res.error_type == "bash_cancelled", res
    assert res.content["outcome"] == "interrupted" and res.content["signal"]
    assert not (ws / "f").exists(), "the shell ran the line after the cancelled sleep"


def test_a_cancelled_script_in_a_subshell_group_never_runs_its_next_line(
    rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A script that left the shell's group (``setsid``) is signalled parents first, so its own shell dies
    before the child it waits for."""
    _children_first(monkeypatch)
    ws = rig.workspace
    inner = f"sleep 5; echo done > {ws}/f"
    res = _cancel_during_sleep(rig, ws, f"setsid bash -c 'echo $$ > {ws}/pgid; {inner}' & wait")
    assert res.error_type == "bash_cancelled", res
    assert not (ws / "f").exists(), "the setsid shell ran the line after the cancelled sleep"
