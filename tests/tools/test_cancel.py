"""tool.cancel: a pending prompt denies, a running run_bash stops with its group, later calls never start."""

from __future__ import annotations

import threading
import time

from geode.protocol.transport import LocalTransport
from geode.tools.executor_client import ExecutorClient
from geode.tools.service import ToolService
from tests.waiting import poll_for


class _Hold:
    def __init__(self) -> None:
        self.prompting = threading.Event()

    def request(self, ctx, tool_name, detail, safety):  # type: ignore[no-untyped-def]
        self.prompting.set()
        time.sleep(30)
        return "y"


class _Yes:
    def request(self, ctx, tool_name, detail, safety):  # type: ignore[no-untyped-def]
        return "y"


def test_cancel_denies_a_pending_prompt(make_rig) -> None:
    ch = _Hold()
    rig = make_rig(approvals=ch)
    out = {}
    t = threading.Thread(target=lambda: out.setdefault("r", rig.call("probe_cached", turn_id="T")))
    t.start()
    assert ch.prompting.wait(5)
    client = ExecutorClient(LocalTransport({"executor": ToolService(rig.executor)}))
    assert client.cancel("s1", "T") == 1
    t.join(5)
    assert out["r"].content["approval"] == "cancelled" and not rig.probes["probe_cached"].calls


def test_cancel_stops_a_running_command_and_refuses_later_calls(make_rig) -> None:
    rig = make_rig(approvals=_Yes())
    out = {}
    t = threading.Thread(
        target=lambda: out.setdefault(
            "r", rig.call("run_bash", {"command": "echo go; sleep 30"}, turn_id="T2")
        )
    )
    t0 = time.monotonic()
    t.start()
    # in flight, not just holding its lock (the lock is taken first: a cancel then is recorded but touches no
    # running call yet, and the call is refused as it starts; this test is about the running command)
    poll_for(lambda: rig.executor.in_flight() == 1, 5, interval_s=0.01, what="the call running")
    assert rig.executor.cancel("s1", "T2") == 1
    t.join(10)
    assert time.monotonic() - t0 < 8
    assert out["r"].error_type == "bash_cancelled"
    later = rig.call("probe", turn_id="T2")
    assert later.error_type == "tool_cancelled" and not rig.probes["probe"].calls
    assert not rig.call("probe", turn_id="other").is_error


def test_session_wide_cancel_does_not_refuse_future_turns(make_rig) -> None:
    rig = make_rig()
    assert rig.executor.cancel("s1") == 0
    assert not rig.call("probe", turn_id="next").is_error
