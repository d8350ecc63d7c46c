"""A loop worker starts no thread per turn once warm (issue 34, session 5): each turn's pykka actor and its
body run on reused threads (geode/loop/reused_threads.py ``TURNS``), in a fresh context each, and the turn's
actor still answers ``status`` and takes a cancel mid-turn (tests/loop/test_worker.py)."""

from __future__ import annotations

import contextvars
import threading
import traceback

import pytest

from geode.loop.reused_threads import TURNS, ReusedThreads
from geode.testing.function_model import FunctionModel
from tests.loop.test_worker import Tree, _worker, tree  # noqa: F401  (the fixture)
from tests.waiting import poll_for

WORKER_FILE = "actors/loop_worker.py"
LOOP_FILE = "geode/loop/agent.py"  # the loop's own model-call and tool threads: reused already, not counted


def _started_for_turns(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Names of the threads started on a turn's way in (from the worker, not from inside the loop)."""
    started: list[str] = []
    original = threading.Thread.start

    def start(self: threading.Thread) -> None:
        files = [f.filename for f in traceback.extract_stack()]
        if any(WORKER_FILE in f for f in files) and not any(LOOP_FILE in f for f in files):
            started.append(self.name)
        original(self)

    monkeypatch.setattr(threading.Thread, "start", start)
    return started


def test_a_warm_worker_starts_no_thread_per_turn(tree: Tree, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    provider = FunctionModel.script(["one", "two", "three", "four", "five"])
    w = _worker(tree, provider)

    def settled() -> bool:  # the last turn's threads are back waiting for the next one
        return not w._running_ids() and (TURNS.started == 0 or TURNS.idle() >= 2)

    for i in range(2):  # warm: the turn's two threads exist and wait, idle, for the next turn
        tree.submit(f"w{i}", "s-threads", "hello")
        tree.wait_done(f"w{i}")
    poll_for(settled, 10, what="the turn threads back to idle")
    started = _started_for_turns(monkeypatch)
    for i in range(3):
        tree.submit(f"t{i}", "s-threads", "hello")
        rec = tree.wait_done(f"t{i}")
        assert rec["outcome"]["termination_reason"] == "natural"
        poll_for(settled, 10, what="the turn threads back to idle")
    assert started == [], f"threads started for 3 turns of a warm worker: {started}"
    assert len(provider.requests) == 5


def test_a_reused_thread_runs_each_job_in_a_fresh_context_under_its_name() -> None:
    threads = ReusedThreads("test-fresh")
    var: contextvars.ContextVar[str] = contextvars.ContextVar("var", default="unset")
    seen: list[tuple[str, str]] = []
    done = threading.Event()

    def first() -> None:
        seen.append((var.get(), threading.current_thread().name))
        var.set("left by the first job")
        done.set()

    def second() -> None:
        seen.append((var.get(), threading.current_thread().name))
        done.set()

    threads.run_fresh(first, "job-1")
    assert done.wait(10)
    poll_for(lambda: threads.idle() == 1, 10, what="the thread idle")
    done.clear()
    threads.run_fresh(second, "job-2")
    assert done.wait(10)
    assert seen == [("unset", "job-1"), ("unset", "job-2")]
    assert threads.started == 1
    poll_for(lambda: threads.idle() == 1, 10, what="the thread idle")
    assert [t.name for t in threading.enumerate()].count("test-fresh") == 1  # its own name between jobs


def test_a_turns_actor_makes_no_queue_of_conditions(tree: Tree, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    """A turn's actor inbox is a C SimpleQueue (pykka's ActorInbox: put, get, empty), not a queue.Queue (three
    Conditions made per turn, a lock and a notify at each put and get); it still takes status and stops."""
    import queue

    provider = FunctionModel.script(["one", "two", "three"])
    w = _worker(tree, provider)
    made: list[str] = []
    original = queue.Queue.__init__

    def init(self: queue.Queue[object], maxsize: int = 0) -> None:
        if any(WORKER_FILE in f.filename for f in traceback.extract_stack()):
            made.append(type(self).__name__)
        original(self, maxsize)

    monkeypatch.setattr(queue.Queue, "__init__", init)
    for i in range(3):
        tree.submit(f"q{i}", "s-inbox", "hello")
        assert tree.wait_done(f"q{i}")["outcome"]["termination_reason"] == "natural"
    poll_for(lambda: not w._running_ids(), 10, what="the turns' actors stopped")
    assert made == []
