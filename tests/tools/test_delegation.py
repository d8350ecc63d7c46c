"""LanesDelegate against a fake lanes: the child's settings (ids, budget, denylist), a bounded wait that
cancels the child at the deadline or with the parent, and an approval relayed to the parent's turn."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from geode.protocol import lanes as lanes_msg
from geode.protocol.errors import BadRequest
from geode.tools.builtin.catalogue import builtin_specs
from geode.tools.delegation import DelegateLimits, LanesDelegate, child_ids
from geode.tools.handlers import ToolFailure
from geode.tools.spec import ToolContext
from tests.waiting import poll_for

PARENT_SETTINGS = {
    "session_id": "s-parent",
    "mode": "IPC",
    "workspace": "/w",
    "model": "claude-sonnet-5",
    "denied_tools": ["web_fetch"],
    "visible_tools": ["read_file", "web_fetch", "run_bash", "delegate_task"],
    "skip_permissions": True,
}


class FakeLanes:
    """Answers lanes.* like LanesService would, for one parent turn; ``finish`` ends the child."""

    def __init__(self, outcome: dict[str, Any] | None = None, parent: dict[str, Any] | None = None) -> None:
        self.outcome = outcome
        self.parent = PARENT_SETTINGS if parent is None else parent
        self.calls: list[tuple[str, Any]] = []
        self.submitted: dict[str, lanes_msg.Submit] = {}
        self.decision = "y"

    def call(self, target: str, type_: str, body: Any = None, *, session=None, timeout_s=5.0):  # type: ignore[no-untyped-def]
        self.calls.append((type_, body))
        if type_ == lanes_msg.TURN:
            if body.turn_id == "t-parent":
                return {"turn_id": "t-parent", "state": "running", "input": {}, "settings": self.parent}
            if body.turn_id in self.submitted and self.outcome is not None:
                return {"turn_id": body.turn_id, "state": "done", "outcome": self.outcome}
            return {"turn_id": body.turn_id, "state": "running"} if body.turn_id in self.submitted else {}
        if type_ == lanes_msg.SUBMIT:
            self.submitted.setdefault(body.turn_id, body)
            return {"turn_id": body.turn_id, "session_id": body.session_id, "state": "queued"}
        if type_ == lanes_msg.CANCEL:
            return {"turn_id": body.turn_id, "state": "cancellation_requested"}
        if type_ == lanes_msg.APPROVAL:
            return {"approval_id": body.approval_id, "decision": self.decision, "note": "ok by me"}
        if type_ == lanes_msg.APPROVAL_REPLY:
            return {"ok": True}
        raise BadRequest(type_)

    def cast(self, *a: Any, **k: Any) -> None:
        pass

    def types(self) -> list[str]:
        return [t for t, _ in self.calls]


def _ctx(**kw: Any) -> ToolContext:
    base = dict(session_id="s-parent", turn_id="t-parent", step_id="t-parent:step-1", operation_id="op-1")
    return ToolContext(**{**base, **kw})


def _delegate(lanes: FakeLanes, **kw: Any) -> LanesDelegate:
    limits = DelegateLimits(max_timeout_s=kw.pop("cap", 600.0), poll_s=0.05, **kw.pop("limits", {}))
    return LanesDelegate(lanes, origin="executor", specs=builtin_specs(), limits=limits, **kw)


def test_the_child_turn_gets_its_own_ids_budget_and_a_stricter_denylist() -> None:
    lanes = FakeLanes(outcome={"text": "42", "termination_reason": "natural"})
    out = _delegate(lanes, cap=120.0)("add it up", parent=_ctx(), timeout_s=600, requested_s=300)
    sid, tid = child_ids("op-1")
    assert out == {"session_id": sid, "turn_id": tid, "text": "42", "termination_reason": "natural"}
    sub = lanes.submitted[tid]
    assert sub.session_id == sid and sub.origin == "executor" and sub.mode == "IPC"
    assert sub.input == {"text": "add it up"}
    s = sub.settings
    assert s["time_budget_s"] == 120.0 and s["session_id"] == sid and s["workspace"] == "/w"
    assert {"web_fetch", "delegate_task", "run_bash"} <= set(s["denied_tools"])  # the parent's, and more
    assert s["visible_tools"] == ["read_file"] and s["skip_permissions"] is True
    assert s["subagent_depth"] == 1 and s["parent_turn_id"] == "t-parent"
    # a retry of the same call finds the same child (lanes.submit is idempotent by turn id)
    _delegate(lanes)("add it up", parent=_ctx(), timeout_s=600)
    assert [b.turn_id for t, b in lanes.calls if t == lanes_msg.SUBMIT] == [tid, tid]


def test_a_parent_without_a_denylist_gets_its_mode_default_plus_sub_agent_denials() -> None:
    lanes = FakeLanes(outcome={"text": "", "termination_reason": "natural"}, parent={"mode": "HEADLESS"})
    _delegate(lanes)("t", parent=_ctx(mode="HEADLESS"), timeout_s=60)
    denied = set(next(iter(lanes.submitted.values())).settings["denied_tools"])
    assert {"run_bash", "delegate_task", "computer"} <= denied


def test_the_budget_is_capped_by_what_the_call_has_left() -> None:
    lanes = FakeLanes(outcome={"text": "ok", "termination_reason": "natural"})
    _delegate(lanes)("t", parent=_ctx(), timeout_s=30, requested_s=300)
    assert next(iter(lanes.submitted.values())).settings["time_budget_s"] == 26.0
    with pytest.raises(ToolFailure) as exc:
        _delegate(FakeLanes())("t", parent=_ctx(), timeout_s=6)
    assert exc.value.error_type == "tool_timeout"


def test_a_child_at_depth_one_cannot_delegate() -> None:
    lanes = FakeLanes(parent={**PARENT_SETTINGS, "subagent_depth": 1})
    with pytest.raises(ToolFailure) as exc:
        _delegate(lanes)("t", parent=_ctx(), timeout_s=60)
    assert exc.value.error_type == "tool_policy_denied" and not lanes.submitted


def test_the_wait_is_bounded_and_cancels_the_child() -> None:
    lanes = FakeLanes()  # the child never finishes
    with pytest.raises(ToolFailure) as exc:
        _delegate(lanes, limits={"margin_s": 0.2, "min_budget_s": 0.5})("t", parent=_ctx(), timeout_s=1.2)
    assert exc.value.error_type == "tool_timeout"
    assert lanes.types()[-1] == lanes_msg.CANCEL


def test_cancelling_the_parent_cancels_the_child() -> None:
    lanes = FakeLanes()
    cancel = threading.Event()
    threading.Timer(0.3, cancel.set).start()
    with pytest.raises(ToolFailure) as exc:
        _delegate(lanes)("t", parent=_ctx(), timeout_s=600, cancel=cancel)
    assert exc.value.error_type == "tool_cancelled"
    (cancelled,) = [b for t, b in lanes.calls if t == lanes_msg.CANCEL]
    assert cancelled.turn_id == child_ids("op-1")[1]


def test_the_turn_done_event_ends_the_wait_and_an_approval_goes_to_the_parent_turn() -> None:
    lanes = FakeLanes()
    d = _delegate(lanes)
    _, tid = child_ids("op-1")
    box: dict[str, Any] = {}
    t = threading.Thread(target=lambda: box.setdefault("out", d("t", parent=_ctx(), timeout_s=60)))
    t.start()
    ask = lanes_msg.ApprovalAsk(
        approval_id="a-1", session_id="s-child", turn_id=tid, tool_name="write_file", detail="x.txt"
    )
    poll_for(lambda: tid in lanes.submitted, 5, interval_s=0.01, what="the child turn submitted")
    d._relay_approval(
        lanes_msg.StreamEvent(
            session_id="s-child", turn_id=tid, seq=1, kind="approval", data=ask.model_dump()
        )
    )
    relayed = [b for t_, b in lanes.calls if t_ == lanes_msg.APPROVAL]
    assert relayed[0].turn_id == "t-parent" and relayed[0].session_id == "s-parent"
    assert relayed[0].detail.startswith("[sub-agent s-child]")
    (reply,) = [b for t_, b in lanes.calls if t_ == lanes_msg.APPROVAL_REPLY]
    assert (reply.approval_id, reply.decision, reply.note) == ("a-1", "y", "ok by me")
    done = {"result": {"text": "fine", "termination_reason": "natural"}}
    d.on_event(lanes_msg.StreamEvent(session_id="s-child", turn_id=tid, seq=2, kind="turn_done", data=done))
    t.join(5)
    assert box["out"]["text"] == "fine"
