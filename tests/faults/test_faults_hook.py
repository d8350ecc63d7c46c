"""The fault hook itself: the GEODE_FAULTS grammar, child scoping, nth, fire-once across incarnations."""

from __future__ import annotations

import os
import subprocess
import sys
import timeit
from pathlib import Path

import pytest

from geode import faults
from tests.actors.tree_kit import ROOT
from tests.waiting import poll_for


def test_grammar_scopes_by_child_and_defaults_to_kill_on_the_first_hit() -> None:
    armed = faults.parse(
        "executor@executor.after_admit, loop-*@loop.before_completed_checkpoint:exit:2", "loop-1"
    )
    assert armed is not None and set(armed) == {"loop.before_completed_checkpoint"}
    f = armed["loop.before_completed_checkpoint"]
    assert (f.action, f.nth, f.child) == ("exit", 2, "loop-*")
    plain = faults.parse("store.after_commit", "anything")
    assert plain is not None and plain["store.after_commit"].action == "kill"
    assert faults.parse("", "executor") is None and faults.parse(None) is None
    assert faults.parse("executor@executor.after_admit", "store") is None


@pytest.mark.parametrize(
    "bad", ["executor.nowhere", "executor.after_admit:explode", "store.after_commit:kill:0"]
)
def test_a_bad_spec_is_refused_loudly(bad: str) -> None:
    with pytest.raises(ValueError, match="GEODE_FAULTS"):
        faults.parse(bad)


def _child(home: Path, spec: str, hits: int) -> subprocess.CompletedProcess[str]:
    code = "from geode.faults import fault\n"
    code += f"for i in range({hits}):\n    fault('store.after_commit')\n    print(i)"
    env = {**os.environ, "GEODE_HOME": str(home), "GEODE_FAULTS": spec, "GEODE_CHILD_NAME": "store"}
    env["PYTHONPATH"] = str(ROOT)
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=30)


def test_the_nth_hit_kills_once_and_the_next_incarnation_runs_clean(tmp_path: Path) -> None:
    first = _child(tmp_path, "store@store.after_commit:kill:2", 3)
    assert first.returncode == -9 and first.stdout.split() == ["0"], first
    assert "fault injected: store.after_commit" in first.stderr
    assert faults.marker("store.after_commit").name == "store.after_commit.fired"
    assert (tmp_path / "faults" / "store.after_commit.fired").read_text().startswith("store pid=")
    again = _child(tmp_path, "store@store.after_commit:kill:2", 3)  # the restarted child: already fired
    assert again.returncode == 0 and again.stdout.split() == ["0", "1", "2"], again
    other = _child(tmp_path / "h2", "executor@store.after_commit:exit", 1)  # scoped to another child
    assert other.returncode == 0, other
    exits = _child(tmp_path / "h3", "store.after_commit:exit", 1)
    assert exits.returncode == 70, exits


def test_unset_costs_one_none_check() -> None:
    faults.rearm(None)
    n = 1_000_000
    hook = min(timeit.repeat(lambda: faults.fault("executor.after_admit"), number=n, repeat=3)) / n
    bare = min(timeit.repeat(lambda: None, number=n, repeat=3)) / n
    print(f"\nfault() unset: {hook * 1e9:.0f} ns per call; an empty lambda call: {bare * 1e9:.0f} ns")
    assert hook < bare * 4 + 200e-9


def test_hang_never_returns_from_the_point(tmp_path: Path) -> None:
    code = "from geode.faults import fault\nfault('store.after_commit')\nprint('returned')"
    env = {**os.environ, "GEODE_HOME": str(tmp_path), "GEODE_FAULTS": "store.after_commit:hang"}
    env["PYTHONPATH"] = str(ROOT)
    proc = subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, text=True)
    try:
        poll_for(lambda: (tmp_path / "faults" / "store.after_commit.fired").exists(), 30, what="the fault")
        assert proc.poll() is None  # fired, and the point has not returned
    finally:
        proc.kill()
        out, _ = proc.communicate(timeout=10)
    assert "returned" not in out
