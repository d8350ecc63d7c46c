"""Helpers for supervisor tests: tiny-child specs, a supervisor running on a thread, and polling waits."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from actors.tree.spec import ChildSpec, Restart, TreeConfig
from actors.tree.supervisor import Supervisor
from geode.protocol.runtime import ChildInfo
from tests.waiting import poll_for

ROOT = Path(__file__).resolve().parents[2]
FAST = TreeConfig(backoff_base_s=0.02, backoff_max_s=0.1, backoff_jitter=0.0, ready_timeout_s=5)


def tiny(
    name: str, mode: str = "serve", restart: Restart = "permanent", shutdown_ms: int = 2000
) -> ChildSpec:
    return ChildSpec(
        name,
        (sys.executable, "-m", "tests.actors.tiny_child", mode),
        restart,
        shutdown_ms,
        env={"PYTHONPATH": str(ROOT)},
    )


wait_for = poll_for  # the suite's one polling wait (tests/waiting.py), under the name these tests use


class Running:
    """A supervisor on a background thread, with its published events recorded."""

    def __init__(self, sup: Supervisor) -> None:
        self.sup = sup
        self.events: list[tuple[float, str, dict[str, Any]]] = []
        self.died: list[tuple[str, int, str]] = []
        self.result: list[int] = []
        sup.on_child_died(lambda n, i, r: self.died.append((n, i, r)))

    def child(self, name: str) -> ChildInfo:
        return next(c for c in self.sup.snapshot() if c.name == name)

    def wait_state(
        self, name: str, state: str, incarnation: int | None = None, timeout_s: float = 10
    ) -> ChildInfo:
        def ok() -> ChildInfo | None:
            c = self.child(name)
            good = c.state == state and (incarnation is None or c.incarnation == incarnation)
            return c if good else None

        return wait_for(ok, timeout_s, interval_s=0.01, what=f"{name} {state} #{incarnation}")


@contextmanager
def supervised(tmp: Path, specs: list[ChildSpec], config: TreeConfig = FAST) -> Iterator[Running]:
    holder: list[Running] = []

    def publish(topic: str, body: dict[str, Any]) -> None:
        holder[0].events.append((time.monotonic(), topic, body))

    sup = Supervisor(specs, config, logs_dir=tmp / "logs", publish=publish)
    run = Running(sup)
    holder.append(run)
    t = threading.Thread(target=lambda: run.result.append(sup.run(install_signals=False)), daemon=True)
    t.start()
    assert sup.started.wait(10)
    try:
        yield run
    finally:
        sup.request_stop()
        t.join(15)
        assert not t.is_alive(), "supervisor did not stop"
