"""Lifecycle event bodies are the typed ``ChildEvent`` on both sides: the supervisor publishes one, and every
subscriber validates the body before acting on it (a malformed one is logged and ignored, never acted on)."""

from __future__ import annotations

import logging
import os
import signal
from pathlib import Path

import pytest

from actors.tree.peer_exits import on_exit_failer
from geode.protocol import lifecycle
from geode.protocol.errors import GeodeError
from tests.actors.supervision_kit import supervised, tiny


class FakeBus:
    """Records which target's in-flight calls the subscriber failed, and with what."""

    def __init__(self) -> None:
        self.failed: list[tuple[str, GeodeError]] = []

    def fail_pending(self, target: str, error: GeodeError) -> int:
        self.failed.append((target, error))
        return 1


def test_the_exit_reader_acts_on_a_valid_body_and_ignores_a_malformed_one(
    caplog: pytest.LogCaptureFixture,
) -> None:
    bus = FakeBus()
    on_event = on_exit_failer(bus, ("executor",), "loop-1")
    with caplog.at_level(logging.WARNING, logger="geode.protocol.lifecycle"):
        on_event(lifecycle.CHILD_EXITED, {"name": "executor", "incarnation": "two", "reason": "exit 1"})
        on_event(lifecycle.CHILD_EXITED, {"incarnation": 2})  # no name
        assert bus.failed == []  # before: the first failed every call in flight on a body nobody checked
        assert sum(lifecycle.CHILD_EXITED in r.getMessage() for r in caplog.records) == 2
    on_event(lifecycle.TREE_STOPPING, {"pid": 1})  # another topic: not a child event
    on_event(lifecycle.CHILD_EXITED, {"name": "executor", "incarnation": 2, "pid": 7, "reason": "exit 1"})
    [(target, err)] = bus.failed
    assert target == "executor" and "executor#2 exited (exit 1)" in err.message


def test_the_supervisor_publishes_child_events_its_readers_accept(tmp_path: Path) -> None:
    with supervised(tmp_path, [tiny("a")]) as run:
        first = run.wait_state("a", "running")
        os.kill(first.pid, signal.SIGKILL)
        run.wait_state("a", "running", first.incarnation + 1)
        seen = [(t, lifecycle.child_event(t, b)) for _, t, b in run.events if t in lifecycle.CHILD_TOPICS]
    assert seen and all(ev is not None for _, ev in seen)
    exits = [ev for t, ev in seen if t == lifecycle.CHILD_EXITED and ev is not None]
    assert [(e.name, e.incarnation, e.reason) for e in exits] == [
        ("a", first.incarnation, "killed by SIGKILL")
    ]
