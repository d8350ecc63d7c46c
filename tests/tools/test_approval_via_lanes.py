"""The executor's approval prompt through the real LanesService to the turn's origin, and the answer back."""

from __future__ import annotations

import threading

from geode.protocol import lanes as lanes_msg
from geode.protocol.transport import LocalTransport
from geode.tools.approval_lanes import LanesApprovalChannel
from tests.lanes.harness import make, req, submit


def test_prompt_reaches_the_origin_and_its_answer_runs_the_call(make_rig) -> None:
    lanes, tr, _ = make()
    lanes.worker_ready("loop-1", 1)
    submit(lanes, "t-lanes", "s1", origin="control", mode="IPC")
    channel = LanesApprovalChannel(LocalTransport({"lanes": lanes}))
    rig = make_rig(approvals=channel)
    out = {}
    args = {"file_path": "via-lanes.txt", "content": "ok"}
    t = threading.Thread(target=lambda: out.setdefault("r", rig.call("write_file", args, turn_id="t-lanes")))
    t.start()
    assert tr.wait_for(lambda: any(e["kind"] == lanes_msg.APPROVAL_REQUEST for e in tr.to("control")))
    assert not (rig.workspace / "via-lanes.txt").exists()  # nothing ran while the prompt is open
    [prompt] = [e for e in tr.to("control") if e["kind"] == lanes_msg.APPROVAL_REQUEST]
    assert prompt["data"]["tool_name"] == "write_file" and "via-lanes.txt" in prompt["data"]["detail"]
    lanes.handle(
        req(
            lanes_msg.APPROVAL_REPLY,
            lanes_msg.ApprovalReply(approval_id=prompt["data"]["approval_id"], decision="y"),
        )
    )
    t.join(10)
    assert not out["r"].is_error and (rig.workspace / "via-lanes.txt").read_text() == "ok"


def test_daemon_turn_gets_no_prompt_from_lanes(make_rig) -> None:
    lanes, _tr, _ = make()
    submit(lanes, "t-d", "s1", origin="webhook", mode="DAEMON")  # (a messenger chat's turn asks its chat)
    rig = make_rig(approvals=LanesApprovalChannel(LocalTransport({"lanes": lanes})))
    # IPC-mode context but the turn is DAEMON in lanes: lanes refuses to prompt → denied
    res = rig.call("write_file", {"file_path": "x", "content": "x"}, turn_id="t-d")
    assert res.error_type == "permission_denied" and not (rig.workspace / "x").exists()
