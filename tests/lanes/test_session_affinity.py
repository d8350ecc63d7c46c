"""A session's next turn goes to the worker that ran its last one when that worker is free (issue 34): the
worker holds the session's history from its own last save and reads none of it again
(geode/loop/checkpoint.py). Other sessions still spread round robin; a busy or dead one is not waited for."""

from __future__ import annotations

from tests.lanes.harness import done, make, submit


def _worker_of(tr, turn: str) -> str:  # type: ignore[no-untyped-def]
    return next(r["_worker"] for r in tr.runs() if r["turn_id"] == turn)


def test_a_sessions_turns_stay_on_its_worker_while_it_is_free() -> None:
    svc, tr, _ = make()
    svc.worker_ready("loop-1", 1)
    svc.worker_ready("loop-2", 1)
    ran: list[str] = []
    for i in range(4):  # before: round robin, the session's turns alternated between the two
        submit(svc, f"a{i}", "A")
        ran.append(_worker_of(tr, f"a{i}"))
        done(svc, f"a{i}", "A", ran[-1])
    assert len(set(ran)) == 1
    home = ran[0]
    submit(svc, "b0", "B")  # another session while A is idle
    submit(svc, "a4", "A")  # A's worker taken by B: A runs on the other one rather than wait
    b0, a4 = _worker_of(tr, "b0"), _worker_of(tr, "a4")
    assert {b0, a4} == {"loop-1", "loop-2"} and (a4 == home or b0 == home)
    done(svc, "b0", "B", b0)
    done(svc, "a4", "A", a4)
    svc.child_died(a4, 1)  # A's last worker is gone: the other takes its next turn
    submit(svc, "a5", "A")
    assert _worker_of(tr, "a5") == b0
