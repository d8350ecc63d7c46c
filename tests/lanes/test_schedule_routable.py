"""A schedule asks whether a worker is reachable once per worker, not once per check (issue 34 session 5,
RELAY): the question reads the bus's peer list, sorted per call, and a schedule used to ask it about every
worker in every pass of its loop and again to pick one. Counted: questions per schedule."""

from __future__ import annotations

from collections import Counter

from tests.lanes.harness import make, submit


def test_a_schedule_asks_about_each_worker_once() -> None:
    asked: Counter[str] = Counter()
    reachable = {"loop-1", "loop-2"}  # loop-3 said no hello yet: never picked

    def routable(name: str) -> bool:
        asked[name] += 1
        return name in reachable

    svc, tr, _ = make(routable=routable)
    for name in ("loop-1", "loop-2", "loop-3"):
        svc.worker_ready(name, 1, capacity=2)
    asked.clear()
    submit(svc, "t1", "A")  # one schedule (admission) that starts it: a pass, a pick, a pass
    assert [r["_worker"] for r in tr.runs()] in (["loop-1"], ["loop-2"])
    assert max(asked.values()) == 1  # before: 3 for each reachable worker
    asked.clear()
    submit(svc, "t2", "B")
    assert {r["_worker"] for r in tr.runs()} <= reachable and len(tr.runs()) == 2
    assert max(asked.values()) == 1
