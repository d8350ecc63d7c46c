"""Issue 34, session 5: a bounded read-only walk (glob_files, grep_files) runs on the calling thread, its
deadline seen by the walk's own cancel checks; no hop to a handler thread and back. Counted, never timed:
the hand-offs to the handler threads per call; and the outcomes stay those of the threaded dispatch (a walk
past its deadline is a timeout and stops, a cancel stops it, a slow one shows on the timeline while it runs,
a tool with an effect still runs on a handler thread)."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import geode.tools.builtin.fs_guard as fs_guard
from geode.tools.dispatch import WORKERS
from geode.tools.handlers import HandlerEntry, ToolEnv
from tests.tools.conftest import Probe, Rig
from tests.waiting import poll_for


def _files(ws: Path, n: int) -> None:
    for i in range(n):
        (ws / f"f{i:03d}.txt").write_text(f"needle {i}\n")


def _hand_offs(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """Calls handed to a handler thread (``Workers.run``) while the test runs."""
    seen: Counter[str] = Counter()
    real = WORKERS.run

    def counted(job: Callable[[], None], name: str) -> None:
        seen["run"] += 1
        real(job, name)

    monkeypatch.setattr(WORKERS, "run", counted)
    return seen


def _slow_entries(monkeypatch: pytest.MonkeyPatch, each_s: float, until: threading.Event) -> Counter[str]:
    """A slow file system: each directory entry the walk looks at takes ``each_s`` until ``until`` is set."""
    seen: Counter[str] = Counter()
    real, real_in = fs_guard._classify, fs_guard._classify_in

    def slow(*args: Any) -> Any:
        seen["entries"] += 1
        until.wait(each_s)
        return real(*args)

    def slow_in(*args: Any) -> Any:  # the walk's shortcut
        seen["entries"] += 1
        until.wait(each_s)
        return real_in(*args)

    monkeypatch.setattr(fs_guard, "_classify", slow)
    monkeypatch.setattr(fs_guard, "_classify_in", slow_in)
    return seen


def test_a_glob_and_a_grep_run_without_a_hand_off_to_a_handler_thread(
    make_rig: Callable[..., Rig], monkeypatch: pytest.MonkeyPatch
) -> None:
    rig = make_rig()
    _files(rig.workspace, 5)
    hand_offs = _hand_offs(monkeypatch)
    found = rig.call("glob_files", {"pattern": "f00*.txt"})
    grepped = rig.call("grep_files", {"pattern": "needle 3"})
    print(f"hand-offs to a handler thread for a glob and a grep: {hand_offs['run']}")
    assert hand_offs["run"] == 0  # was 2: each call waited for its handler on another thread
    assert not found.is_error and len(found.content["files"]) == 5, found.content
    assert not grepped.is_error and grepped.content["matches"] == [f"{rig.workspace}/f003.txt:1:needle 3"]
    assert not rig.call("probe", {"x": 1}).is_error  # any other handler: on a handler thread as before
    assert hand_offs["run"] == 1


def test_a_handler_marked_inline_with_an_effect_still_runs_on_a_handler_thread(
    make_rig: Callable[..., Rig], monkeypatch: pytest.MonkeyPatch
) -> None:
    on: list[str] = []
    probe = Probe()

    def handler(args: dict[str, Any], env: ToolEnv) -> Any:
        on.append(threading.current_thread().name)
        return probe(args, env)

    rig = make_rig(handlers={"test:probe_write": HandlerEntry(handler, inline=True)})
    hand_offs = _hand_offs(monkeypatch)
    out = rig.call("probe_write", {"x": 1})
    assert not out.is_error, out.content
    assert hand_offs["run"] == 1 and on[0].startswith("tool-op-")  # receipted: never on the caller's thread
    assert probe.calls == [{"x": 1}]


def test_a_walk_past_its_deadline_is_a_timeout_and_stops_there(
    make_rig: Callable[..., Rig], monkeypatch: pytest.MonkeyPatch
) -> None:
    rig = make_rig()
    _files(rig.workspace, 60)
    never = threading.Event()
    seen = _slow_entries(monkeypatch, 0.02, never)  # 60 entries: ~1.2 s of walk, the deadline 0.3 s
    out = rig.call("glob_files", {"pattern": "*.txt"}, deadline_ms=int(time.time() * 1000) + 300)
    assert out.is_error and out.error_type == "tool_timeout", out.content
    assert 0 < seen["entries"] < 60  # the walk saw its deadline and stopped; it did not run on
    never.set()
    later = rig.call("glob_files", {"pattern": "f001.txt"})  # the pool thread is free again
    assert not later.is_error and len(later.content["files"]) == 1
    rows = rig.timeline()
    assert [r.kind for r in rows][-4:] == ["tool.called", "tool.completed"] * 2
    assert rows[-3].payload["status"] == "error"


def test_a_cancel_stops_a_walk_running_on_the_calling_thread(
    make_rig: Callable[..., Rig], monkeypatch: pytest.MonkeyPatch
) -> None:
    rig = make_rig()
    _files(rig.workspace, 60)
    release = threading.Event()
    seen = _slow_entries(monkeypatch, 5.0, release)  # each entry waits until the test lets it go
    done: list[Any] = []
    caller = threading.Thread(target=lambda: done.append(rig.call("glob_files", {"pattern": "*.txt"})))
    caller.start()
    try:
        poll_for(lambda: seen["entries"] >= 1, 10, what="the walk to start")
        assert rig.executor.in_flight() == 1
        assert rig.executor.cancel("s1", "t1") == 1
    finally:
        release.set()
        caller.join(10)
    assert done and seen["entries"] < 60  # stopped at its next check, not after all 60 entries
    assert rig.executor.in_flight() == 0


def test_a_slow_walk_is_on_the_timeline_before_it_ends(
    make_rig: Callable[..., Rig], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The held tool.called row goes to the store HOLD_S after it was queued, while the walk (on the caller's
    thread: nobody waits for it) still runs: the timeline writer times itself."""
    rig = make_rig()
    _files(rig.workspace, 5)
    release = threading.Event()
    seen = _slow_entries(monkeypatch, 5.0, release)  # each entry waits until the test lets it go
    done: list[Any] = []
    caller = threading.Thread(
        target=lambda: done.append(rig.call("glob_files", {"pattern": "*.txt"}, session_id="s-slow"))
    )
    caller.start()
    try:
        poll_for(lambda: seen["entries"] >= 1, 10, what="the walk to start")
        kinds = poll_for(
            lambda: [r.event.kind for r in rig.store.client.read_timeline("s-slow")],
            10,
            what="the tool.called row while the walk runs",
        )
        assert kinds == ["tool.called"] and not done
    finally:
        release.set()
        caller.join(10)
    assert done and not done[0].is_error and len(done[0].content["files"]) == 5
    assert [r.kind for r in rig.timeline("s-slow")] == ["tool.called", "tool.completed"]


def test_a_cooperative_cancel_without_its_condition_still_acts_as_an_event() -> None:
    """Session 7: ``Cooperative`` makes Event's Condition on first use; a setter and a waiter share it."""
    from geode.tools.dispatch import Cooperative

    ev = Cooperative()
    assert not ev.is_set() and "_made" not in ev.__dict__  # reading the flag makes nothing
    setter = threading.Timer(0.05, ev.set)
    setter.start()
    assert ev.wait(10) and ev.is_set()
    ev.clear()
    assert not ev.is_set() and not ev.wait(0.01)
    late = Cooperative()
    late.end = time.monotonic() - 1
    assert late.is_set() and late.expired and late.wait(0)
