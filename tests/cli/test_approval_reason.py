"""A denial's reason ("n: because …") travels CLI → control → lanes → executor and reaches the model."""

from __future__ import annotations

import threading

from geode.lanes.approvals import ApprovalDesk
from geode.protocol import control as c
from geode.protocol import lanes as lanes_msg
from tests.tools.conftest import make_rig, store, workspace  # noqa: F401  (fixtures)
from tests.tools.test_approvals import Channel


def test_the_denial_result_the_model_sees_carries_the_reason(make_rig) -> None:  # noqa: F811
    rig = make_rig(approvals=Channel("n: the file is generated"))
    res = rig.call("probe_cached")
    assert res.error_type == "permission_denied" and res.content["approval"] == "n"
    assert "with this reason: the file is generated" in res.content["error"]
    assert not rig.probes["probe_cached"].calls


def test_lanes_hands_the_note_back_with_the_decision() -> None:
    desk = ApprovalDesk()
    assert desk.open("a1", session_id="s", turn_id="t", origin="control")
    got: list[lanes_msg.ApprovalDecision] = []
    waiter = threading.Thread(target=lambda: got.append(desk.wait("a1", 10)))
    waiter.start()
    response = c.ApprovalResponse(approval_id="a1", decision="n", note="why")  # what the CLI sends
    reply = lanes_msg.ApprovalReply.model_validate(response.model_dump())  # what control casts to lanes
    assert desk.answer(reply.approval_id, reply.decision, origin="control", note=reply.note)
    waiter.join(10)
    assert got[0].decision == "n" and got[0].note == "why"
