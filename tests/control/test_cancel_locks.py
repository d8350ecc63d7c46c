"""A call of a cancelled turn that was still waiting for its resource locks never starts: it is refused as
cancelled (not applied) once the locks come free, and its handler is never called."""

from __future__ import annotations

import threading

from tests.tools.conftest import make_rig, store, workspace  # noqa: F401  (fixtures)
from tests.waiting import poll_for


class _Yes:
    def request(self, ctx, tool_name, detail, safety):  # type: ignore[no-untyped-def]
        return "y"


def test_a_call_waiting_for_locks_when_its_turn_is_cancelled_never_starts(make_rig) -> None:  # noqa: F811
    rig = make_rig(approvals=_Yes())
    probe = rig.probes["probe_write"]
    probe.release = threading.Event()
    out: dict[str, object] = {}
    first = threading.Thread(
        target=lambda: out.setdefault("a", rig.call("probe_write", {"x": 1}, turn_id="TA"))
    )
    first.start()
    assert probe.started.wait(5)
    second = threading.Thread(
        target=lambda: out.setdefault("b", rig.call("probe_write", {"x": 2}, session_id="s2", turn_id="TB"))
    )
    second.start()

    def both_on_the_lock() -> bool:
        entry = rig.executor.locks._entries.get("global:probe")
        return entry is not None and entry.users >= 2

    poll_for(both_on_the_lock, 5, interval_s=0.01, what="both calls on the global:probe lock")
    rig.executor.cancel("s2", "TB")
    probe.release.set()
    first.join(10)
    second.join(10)
    assert not out["a"].is_error  # type: ignore[union-attr]
    b = out["b"]
    assert b.error_type == "tool_cancelled" and b.executed is False  # type: ignore[union-attr]
    assert probe.calls == [{"x": 1}]
